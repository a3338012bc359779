"""The `[agents]` configuration section: the one agent catalogue (gathered by `phloem.config`).

Every agent is declared here once, by name, and every surface resolves it by that name:
`phloem agent run`, `phloem chat` and sessions, `phloem eval run`, `phloem mcp serve
--agents`, planners' sub-agents, and the agents an LLM agent (`agents`), a Live session
(`[live] agents`) or a planning executor (`[planning.agents]`) delegates to.

    [agents.functions.fetchFilings]
    fn = "phloem.examples.supplier_risk:fetch_filings"
    description = "Collects the latest filings"
    input_keys = ["company"]
    output_key = "filings"

    [agents.llm.coder]
    provider = "flash"                 # a [providers.NAME] entry
    harness = true                     # the coding-agent capabilities (below)

    [agents.planners.supplierBrief]
    planner = "goal_oriented"          # sequential | parallel | loop | goal_oriented | p2p
    sub_agents = ["fetchFilings", "fetchNews", "analyzeFinancials", "assessRisk", "writeBrief"]
    goal = "brief"
    replan = "replan"                  # ignore | fail_stop | replan
    max_replans = 2
    max_iterations = 12

`[agents.llm.NAME]` declares an `LlmAgent` on a configured provider with capabilities, each
its own key: tools by name (the coding tools on a workspace, and `[components]` tools), the
tools of MCP servers (`mcp_servers`), agents it delegates to (`agents`: a tool each, whose
call runs that agent as a run of its own), the workspace's instructions, its skills as tools,
prompt templates (`/name args`), a tool policy (`tools_allow` / `tools_deny`),
confirmation of mutating tool calls, and compaction of a session's requests
(`context_tokens` > 0). `harness = true` is the coding agent's set of defaults for the keys
left unset: the seven coding tools, every configured MCP server, instructions, skills and
templates on, the built-in coding-agent instruction, 50 tool rounds. A session's turn runs
the agent on the session's workspace; any other run on `workdir`.

`planner = "supervisor"` with `provider = ...` is a model-driven `SupervisorPlanner`.
Goal-oriented and P2P planners take their contracts from the FunctionAgents' input and
output keys unless `[agents.planners.NAME.contracts.AGENT]` gives them. Other agents
(`LlmAgent`s with their models, custom `Agent`s) come from `[agents.components]`:
name = `module:attribute` of an `Agent` or a zero-argument factory returning one.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from phloem.base.settings import ComponentPath, Section
from phloem.protocols.content import (
    MAX_TEMPERATURE,
    MIN_THINKING_BUDGET,
    GenerateConfig,
    ThinkingConfig,
)

_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"

AgentName = Annotated[str, msgspec.Meta(pattern=_NAME)]
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")]


class FunctionAgentConfig(Section, kw_only=True):
    fn: ComponentPath  # `module:attribute` of the trusted callable it calls
    # What it does: for agent lists, a supervisor planner and its delegation tool.
    description: str = ""
    # State keys passed to fn as keyword arguments; one absent is `missing_input`.
    input_keys: list[Key] = []
    # State key a non-None return value is written to (at most 4 MiB of JSON); unset: none.
    output_key: Key | None = None
    # Call fn in a capped process child, so a crash or a leak takes down only that child.
    isolate: bool = False
    # With isolate: the child's memory cap (its RLIMIT_AS and the summed RSS of what it
    # forks; unset: 512 MiB); over it, `agent_heap_exceeded`.
    max_memory_bytes: Annotated[int, msgspec.Meta(ge=16 * 1024 * 1024)] | None = None
    # With isolate: time the child has to return; then it is killed (`agent_timeout`).
    timeout_s: Annotated[float, msgspec.Meta(ge=0.1, le=86_400)] = 300.0


class ContractConfig(Section, kw_only=True):
    input_keys: list[Key] = []  # state keys the agent needs before it can run
    output_key: Key  # the state key it produces


CODING_TOOLS = ("read", "write", "edit", "bash", "grep", "find", "ls")
"""The coding tools, by name, in their order (a harness agent's default `tools`)."""
HARNESS_MAX_TOOL_ROUNDS = 50
DEFAULT_MAX_TOOL_ROUNDS = 10
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]


class LlmAgentConfig(Section, kw_only=True):
    """`[agents.llm.NAME]`: one LLM agent and its capabilities. A key left unset (None)
    takes its `harness` default (`spec()` resolves them)."""

    provider: AgentName  # a `[providers.NAME]` entry; its key is read at the first call
    # What it does: for agent lists, a supervisor planner and its delegation tool.
    description: str = ""
    # The system instruction, a template over the run's state (`{key}`); empty with
    # `harness = true`: the built-in coding-agent instruction.
    instruction: str = ""
    output_key: Key | None = None  # state key its final text is written to; unset: none
    # The coding agent's defaults for the keys left unset: the coding tools, every MCP
    # server, instructions, skills, templates, the built-in instruction, 50 tool rounds.
    harness: bool = False
    # Rounds of tool calls in one invocation (unset: 10, harness 50); still calling tools
    # after them is `tool_round_limit`.
    max_tool_rounds: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    # The output token cap of each model call; unset: the provider's own.
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None
    # The sampling temperature of each model call (0-2); unset: the provider's own.
    temperature: Annotated[float, msgspec.Meta(ge=0, le=MAX_TEMPERATURE)] | None = None
    # The thinking token budget of each model call (0: no thinking, -1: the provider
    # decides); unset: the provider's own.
    thinking_budget: Annotated[int, msgspec.Meta(ge=MIN_THINKING_BUDGET, le=1_000_000)] | None = (
        None
    )
    # Whether the model returns its thought parts; unset: the provider's own.
    include_thoughts: bool | None = None
    # Tools by name: the coding tools (read, write, edit, bash, grep, find, ls) and
    # `[components]` entries that are tools or callables.
    tools: list[ToolName] | None = None
    # The workspace of runs outside a session (agent runs, eval, `mcp serve`); a
    # session's turn runs on the session's own workspace.
    workdir: str = ""
    # `[mcp.servers.NAME]` entries whose tools it gets (harness default: every one).
    mcp_servers: list[AgentName] | None = None
    # Agents of the catalogue it may delegate to: a tool each, named after the agent,
    # whose call runs that agent as a run of its own and answers its output.
    agents: list[AgentName] = []
    # The workspace's instruction files (AGENTS.md, CLAUDE.md, ...) in its requests.
    instructions: bool | None = None
    skills: bool | None = None  # the workspace's skills, as `list_skills` / `load_skill` tools
    templates: bool | None = None  # the workspace's prompt templates (`/name args` expanded)
    # Tool policy: the tools it may call (None: every tool); denials win.
    tools_allow: list[ToolName] | None = None
    tools_deny: list[ToolName] = []  # tools it may not call; a call answers `denied`
    # Mutating tool calls (write, edit, bash, any tool not read-only) wait for the run's
    # owner to approve; a refusal is `not_confirmed` and the tool does not run.
    confirmation: bool = False
    # Time the owner has to answer a confirmation; then the call is `not_confirmed`.
    confirmation_timeout_s: Annotated[float, msgspec.Meta(ge=0.01, le=3_600)] = 60.0
    # Compaction of a session's requests (plasmid §4): off unless context_tokens > 0.
    context_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000_000)] = 0
    # Compaction starts once a request's estimate reaches context_tokens x this.
    trigger_fraction: Fraction = 0.85
    # Compaction elides and drops until the estimate is at most context_tokens x this.
    target_fraction: Fraction = 0.60
    # The last contents of a request, never elided nor dropped.
    keep_recent_contents: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 12
    # A tool response is elided only if its body costs at least this many tokens.
    minimum_elision_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000_000)] = 200
    # Tools whose responses are never elided, nor the turns that use them dropped.
    preserve_tool_names: list[str] = []
    # Correct the token estimate by what the provider counted, after each call.
    calibration: bool = True

    def spec(self, name: str) -> LlmAgentSpec:
        """This entry with every unset key resolved (the `harness` defaults or none)."""
        harness = self.harness
        rounds = HARNESS_MAX_TOOL_ROUNDS if harness else DEFAULT_MAX_TOOL_ROUNDS
        return LlmAgentSpec(
            name=name,
            config=self,
            tools=tuple(
                dict.fromkeys(
                    self.tools if self.tools is not None else (CODING_TOOLS if harness else ())
                )
            ),
            mcp_servers=None
            if self.mcp_servers is None and harness
            else tuple(self.mcp_servers or ()),
            instructions=harness if self.instructions is None else self.instructions,
            skills=harness if self.skills is None else self.skills,
            templates=harness if self.templates is None else self.templates,
            max_tool_rounds=self.max_tool_rounds or rounds,
        )

    def generate_config(self) -> GenerateConfig:
        """What goes with every model request of this agent (unset keys: the provider's)."""
        thinking = None
        if self.thinking_budget is not None or self.include_thoughts is not None:
            thinking = ThinkingConfig(
                include_thoughts=self.include_thoughts, thinking_budget=self.thinking_budget
            )
        return GenerateConfig(
            max_output_tokens=self.max_output_tokens,
            temperature=self.temperature,
            thinking_config=thinking,
        )


class LlmAgentSpec(msgspec.Struct, frozen=True, kw_only=True):
    """An `[agents.llm.NAME]` entry resolved: what a run of the agent gets."""

    name: str
    config: LlmAgentConfig
    tools: tuple[str, ...]
    mcp_servers: tuple[str, ...] | None  # None: every configured MCP server
    instructions: bool
    skills: bool
    templates: bool
    max_tool_rounds: int

    @property
    def needs_workspace(self) -> bool:
        return bool(self.tools or self.instructions or self.skills or self.templates)


class PlannerAgentConfig(Section, kw_only=True):
    # How it picks the sub-agents to run next (a new planner for every run).
    planner: Literal["sequential", "parallel", "loop", "goal_oriented", "p2p", "supervisor"]
    sub_agents: list[AgentName]  # agents of the catalogue it runs; they may not form a cycle
    # What it does: for agent lists, a supervisor planner and its delegation tool.
    description: str = ""
    # Planner decisions in one run; reaching it ends the run with `iteration_limit`.
    max_iterations: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 100
    # A failed sub-agent ends the run with `agent_failed` (stop), or the planner decides
    # (continue).
    on_agent_error: Literal["stop", "continue"] = "stop"
    # loop: full passes over the sub-agents (≤ 1: one); an escalation stops it sooner.
    max_cycles: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 1
    goal: str = ""  # goal_oriented (required): the state key to produce
    search: Literal["dfs", "astar"] = "dfs"  # goal_oriented: backward DFS or forward A*
    # goal_oriented: what a group's missing or invalid output means: carry on, stop
    # (`goal_missing`), or plan again from the current state.
    replan: Literal["ignore", "fail_stop", "replan"] = "ignore"
    # goal_oriented, replan: failed groups in a row before it gives up.
    max_replans: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1
    # goal_oriented: clear the declared output keys before planning, so no stale value counts.
    fresh_outputs: bool = True
    # p2p: sub-agent invocations before it stops (checked before each wave).
    max_invocations: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10
    # goal_oriented, p2p: each sub-agent's input and output keys (default: a
    # FunctionAgent's own; any other sub-agent needs one).
    contracts: dict[AgentName, ContractConfig] = {}
    provider: str = ""  # supervisor (required): the `[providers.NAME]` that decides
    system_instruction: str | None = None  # supervisor: its model's system instruction, if any
    # supervisor: how many of the last events its model is shown.
    max_events: Annotated[int, msgspec.Meta(ge=1, le=1_000)] = 20
    # supervisor: model calls in one run; reaching it ends the run with `iteration_limit`.
    max_model_calls: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 25


class AgentsConfig(Section, kw_only=True):
    functions: dict[AgentName, FunctionAgentConfig] = {}  # trusted callables as agents
    llm: dict[AgentName, LlmAgentConfig] = {}  # LLM agents on configured providers
    planners: dict[AgentName, PlannerAgentConfig] = {}  # planner agents over the others
    # Any other `Agent`: `module:attribute` of one named as its key, or of a factory of one.
    components: dict[AgentName, ComponentPath] = {}
    # Agent runs going at once; one more start is refused with `backpressure`. An
    # `LlmAgent`'s waiting run holds no thread (a fiber); any other agent's holds one.
    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 64
    # One sub-agent invocation running longer than this is killed (agent_timeout).
    invocation_timeout_s: Annotated[float, msgspec.Meta(ge=0.01, le=86_400)] = 600.0
    # A delegated agent's run (an agent named in `agents` of an LLM agent or of [live])
    # still going after this long is cancelled; its call answers `timeout`.
    delegation_timeout_s: Annotated[float, msgspec.Meta(ge=0.1, le=86_400)] = 600.0
