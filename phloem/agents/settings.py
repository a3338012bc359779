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

_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"

AgentName = Annotated[str, msgspec.Meta(pattern=_NAME)]
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")]


class FunctionAgentConfig(Section, kw_only=True):
    fn: ComponentPath
    description: str = ""
    input_keys: list[Key] = []
    output_key: Key | None = None
    isolate: bool = False
    max_memory_bytes: Annotated[int, msgspec.Meta(ge=16 * 1024 * 1024)] | None = None
    timeout_s: Annotated[float, msgspec.Meta(ge=0.1, le=86_400)] = 300.0


class ContractConfig(Section, kw_only=True):
    input_keys: list[Key] = []
    output_key: Key


CODING_TOOLS = ("read", "write", "edit", "bash", "grep", "find", "ls")
"""The coding tools, by name, in their order (a harness agent's default `tools`)."""
HARNESS_MAX_TOOL_ROUNDS = 50
DEFAULT_MAX_TOOL_ROUNDS = 10
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]


class LlmAgentConfig(Section, kw_only=True):
    """`[agents.llm.NAME]`: one LLM agent and its capabilities. A key left unset (None)
    takes its `harness` default (`spec()` resolves them)."""

    provider: AgentName  # a `[providers.NAME]` entry; its key is read at the first call
    description: str = ""
    # The system instruction, a template over the run's state (`{key}`); empty with
    # `harness = true`: the built-in coding-agent instruction.
    instruction: str = ""
    output_key: Key | None = None
    harness: bool = False
    max_tool_rounds: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None
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
    # The workspace's instruction files, its skills as tools, `/name args` templates.
    instructions: bool | None = None
    skills: bool | None = None
    templates: bool | None = None
    # Tool policy (denials win; None allows every tool) and confirmation of mutating tools.
    tools_allow: list[ToolName] | None = None
    tools_deny: list[ToolName] = []
    confirmation: bool = False
    confirmation_timeout_s: Annotated[float, msgspec.Meta(ge=0.01, le=3_600)] = 60.0
    # Compaction of a session's requests (plasmid §4): off unless context_tokens > 0.
    context_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000_000)] = 0
    trigger_fraction: Fraction = 0.85
    target_fraction: Fraction = 0.60
    keep_recent_contents: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 12
    minimum_elision_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000_000)] = 200
    preserve_tool_names: list[str] = []
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
    planner: Literal["sequential", "parallel", "loop", "goal_oriented", "p2p", "supervisor"]
    sub_agents: list[AgentName]
    description: str = ""
    max_iterations: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 100
    on_agent_error: Literal["stop", "continue"] = "stop"
    max_cycles: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 1
    goal: str = ""
    search: Literal["dfs", "astar"] = "dfs"
    replan: Literal["ignore", "fail_stop", "replan"] = "ignore"
    max_replans: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1
    fresh_outputs: bool = True
    max_invocations: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10
    contracts: dict[AgentName, ContractConfig] = {}
    # supervisor
    provider: str = ""
    system_instruction: str | None = None
    max_events: Annotated[int, msgspec.Meta(ge=1, le=1_000)] = 20
    max_model_calls: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 25


class AgentsConfig(Section, kw_only=True):
    functions: dict[AgentName, FunctionAgentConfig] = {}
    llm: dict[AgentName, LlmAgentConfig] = {}
    planners: dict[AgentName, PlannerAgentConfig] = {}
    components: dict[AgentName, ComponentPath] = {}
    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 64
    # One sub-agent invocation running longer than this is killed (agent_timeout).
    invocation_timeout_s: Annotated[float, msgspec.Meta(ge=0.01, le=86_400)] = 600.0
    # A delegated agent's run (an agent named in `agents` of an LLM agent or of [live])
    # still going after this long is cancelled; its call answers `timeout`.
    delegation_timeout_s: Annotated[float, msgspec.Meta(ge=0.1, le=86_400)] = 600.0
