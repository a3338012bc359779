"""The `[agents]` configuration section (gathered by `phloem.config`).

    [agents.functions.fetchFilings]
    fn = "phloem.examples.supplier_risk:fetch_filings"
    description = "Collects the latest filings"
    input_keys = ["company"]
    output_key = "filings"

    [agents.planners.supplierBrief]
    planner = "goal_oriented"          # sequential | parallel | loop | goal_oriented | p2p
    sub_agents = ["fetchFilings", "fetchNews", "analyzeFinancials", "assessRisk", "writeBrief"]
    goal = "brief"
    replan = "replan"                  # ignore | fail_stop | replan
    max_replans = 2
    max_iterations = 12

`[agents.llm.NAME]` declares an `LlmAgent` on a configured provider (`provider = "flash"`),
optionally with coding tools on a workspace (`tools`, `workdir`), discovered instructions
and skills (`instructions`, `skills`: see `phloem.instructions`), a tool policy
(`tools_allow`, `tools_deny`) and confirmation of mutating tools (`confirmation`,
`confirmation_timeout_s`),
and `planner = "supervisor"` with `provider = ...` a model-driven `SupervisorPlanner`.
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


class LlmAgentConfig(Section, kw_only=True):
    provider: AgentName  # a `[providers.NAME]` entry; its key is read at the first call
    description: str = ""
    instruction: str = ""
    output_key: Key | None = None
    max_tool_rounds: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    # Coding tools by name (read, write, edit, bash, grep, find, ls) on `workdir`.
    tools: list[ToolName] = []
    workdir: str = ""
    # Discover the instructions of `workdir` for every run; offer its skills as tools.
    instructions: bool = False
    skills: bool = False
    # Tool policy (denials win; None allows every tool) and confirmation of mutating tools.
    tools_allow: list[ToolName] | None = None
    tools_deny: list[ToolName] = []
    confirmation: bool = False
    confirmation_timeout_s: Annotated[float, msgspec.Meta(ge=0.01, le=3_600)] = 60.0
    mcp_servers: list[AgentName] = []  # `[mcp.servers.NAME]` entries whose tools it gets


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
