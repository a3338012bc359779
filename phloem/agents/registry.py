"""`AgentRegistry`: agents by name, built from the `[agents]` config or registered in code.

Configured agents are trusted code named in the daemon config — FunctionAgents as
`module:attribute` callables, LlmAgents on configured providers, other agents as
`module:attribute` of an `Agent` (or a zero-argument factory returning one), and
PlannerAgents assembled from those by name with one of the built-in planners. Requests
only ever name a registered agent; nothing from a request is imported.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from phloem.agents.agent import Agent
from phloem.agents.function_agent import FunctionAgent
from phloem.agents.llm_agent import LlmAgent
from phloem.agents.metadata import AgentMetadata
from phloem.agents.planner_agent import PlannerAgent
from phloem.agents.planners.base import Planner
from phloem.agents.planners.goap import GoalOrientedPlanner, ReplanPolicy
from phloem.agents.planners.goap_search import AStarSearch, DfsSearch
from phloem.agents.planners.llm_supervisor import SupervisorPlanner
from phloem.agents.planners.loop import LoopPlanner
from phloem.agents.planners.p2p import P2PPlanner
from phloem.agents.planners.parallel import ParallelPlanner
from phloem.agents.planners.sequential import SequentialPlanner
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.model import Model, ModelError, StreamingModel
from phloem.supervision.spec import Limits
from phloem.tools.contract import Tool, ToolContext
from phloem.tools.registry import coding_tools
from phloem.tools.toolset import Toolset
from phloem.tools.workspace import Workspace

MAX_AGENTS = 10_000


class AgentRegistry:
    """Thread-safe name → agent map with at most `MAX_AGENTS` entries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._agents: dict[str, Agent] = {}

    def add(self, agent: Agent, *, replace: bool = False) -> Agent:
        if not isinstance(agent, Agent):
            raise TypeError("agent must be an Agent")
        with self._lock:
            existing = self._agents.get(agent.name)
            if existing is not None and existing is not agent and not replace:
                raise PhloemError(
                    ErrorKind.AGENT_EXISTS, f"an agent named {agent.name!r} is registered"
                )
            if existing is None and len(self._agents) >= MAX_AGENTS:
                raise PhloemError(ErrorKind.LIMIT_EXCEEDED, f"MAX_AGENTS ({MAX_AGENTS}) reached")
            self._agents[agent.name] = agent
        return agent

    def get(self, name: str) -> Agent:
        with self._lock:
            agent = self._agents.get(name)
        if agent is None:
            raise PhloemError(ErrorKind.UNKNOWN_AGENT, f"no agent named {name[:80]!r}")
        return agent

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._agents)

    def all(self) -> list[Agent]:
        with self._lock:
            return [self._agents[n] for n in sorted(self._agents)]


def _invalid(message: str) -> PhloemError:
    return PhloemError(ErrorKind.CONFIG_INVALID, message)


def _why(exc: Exception) -> str:
    """What was wrong, without the kind prefix a `PhloemError` (e.g. a range error) adds."""
    return exc.message if isinstance(exc, PhloemError) else str(exc)


class ProviderModel:
    """A configured provider's model, resolved at its first call (so a missing API key
    fails that call — `model_failed` — rather than the daemon's start)."""

    def __init__(
        self,
        provider: str,
        resolve: Callable[[str], Model],
        describe: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        self.provider = provider
        self._resolve = resolve
        self._describe_provider = describe

    def generate(self, request: ModelRequest) -> ModelResponse:
        return self._resolve(self.provider).generate(request)

    def _describe(self, attribute: str) -> str:
        """What the provider's config says of its model (telemetry's GenAI attributes),
        without resolving it; "" for a provider that is not configured."""
        if self._describe_provider is None:
            return ""
        try:
            return self._describe_provider(self.provider).get(attribute, "")
        except Exception:
            return ""

    @property
    def provider_name(self) -> str:
        return self._describe("provider_name")

    @property
    def operation_name(self) -> str:
        return self._describe("operation_name")

    @property
    def model(self) -> str:
        return self._describe("model")

    def stream(self, request: ModelRequest) -> Iterator[ModelResponse]:
        """The provider's stream (`unsupported_streaming` where it has none)."""
        model = self._resolve(self.provider)
        if not isinstance(model, StreamingModel):
            raise ModelError(ErrorKind.UNSUPPORTED_STREAMING, f"{self.provider} does not stream")
        return model.stream(request)

    def __repr__(self) -> str:
        return f"<ProviderModel {self.provider!r}>"


def _no_models(name: str) -> Model:
    raise PhloemError(ErrorKind.UNKNOWN_PROVIDER, f"no provider named {name!r} is configured")


def _load(load: Callable[[str], Any], path: str, where: str) -> Any:
    """`load(path)`; a failure names the config key (`agents.functions.NAME.fn`) too."""
    try:
        return load(path)
    except PhloemError as exc:
        raise PhloemError(exc.kind, f"{where}: {exc.message}", exc.details) from exc


def llm_tools(lc: Any, instructions: Any = None) -> tuple[list[Tool], ToolContext | None]:
    """The tools of an `[agents.llm.NAME]` entry: its coding tools by name on `workdir`,
    then `list_skills` / `load_skill` when `skills` is on and `workdir` has skills."""
    if not (lc.tools or lc.skills or lc.instructions):
        return [], None
    if not lc.workdir:
        raise ValueError("tools, instructions and skills need a workdir")
    workdir = os.path.expanduser(lc.workdir)
    if not os.path.isdir(workdir):
        raise ValueError(f"workdir is not a directory: {lc.workdir}")
    available = {tool.name: tool for tool in coding_tools()}
    unknown = [n for n in lc.tools if n not in available]
    if unknown:
        raise ValueError(f"unknown tools {unknown} (coding tools: {', '.join(available)})")
    tools: list[Tool] = [available[n] for n in dict.fromkeys(lc.tools)]
    if lc.skills:
        from phloem.instructions.skills import SkillCatalog, skill_tools

        tools += skill_tools(SkillCatalog(instructions, workdir))
    return tools, ToolContext(workspace=Workspace(workdir))


def build_registry(
    cfg: Any,
    load: Callable[[str], Any],
    models: Callable[[str], Model] = _no_models,
    instructions: Any = None,
    mcp_toolset: Callable[[list[str]], Toolset] | None = None,
    describe: Callable[[str], Mapping[str, str]] | None = None,
) -> AgentRegistry:
    """Agents from an `[agents]` config section; `load` resolves `module:attribute`,
    `models` a provider name to its model, `mcp_toolset` MCP server names to the
    toolset an LlmAgent's `mcp_servers` gives it. A component that cannot be loaded is an error
    naming its key path (`agents.functions.NAME.fn: cannot load agent 'mod:fn': ...`).
    `instructions` is the `[instructions]` section (skill roots) for LLM agents' skills."""
    registry = AgentRegistry()
    for name, fc in cfg.functions.items():
        where = f"agents.functions.{name}"
        fn = _load(load, fc.fn, f"{where}.fn")
        if not callable(fn):
            raise _invalid(f"{where}: {fc.fn!r} is not callable")
        limits = Limits(max_memory_bytes=fc.max_memory_bytes) if fc.max_memory_bytes else None
        try:
            registry.add(
                FunctionAgent(
                    name,
                    fc.description,
                    fn,
                    fc.input_keys,
                    fc.output_key,
                    fc.isolate,
                    limits=limits,
                    timeout_s=fc.timeout_s,
                )
            )
        except (TypeError, ValueError) as exc:
            raise _invalid(f"{where}: {_why(exc)}") from None
    for name, lc in cfg.llm.items():
        try:
            tools, tool_context = llm_tools(lc, instructions)
            toolsets = []
            if lc.mcp_servers:
                if mcp_toolset is None:
                    raise ValueError("mcp_servers needs configured [mcp.servers]")
                toolsets.append(mcp_toolset(list(lc.mcp_servers)))
            registry.add(
                LlmAgent(
                    name,
                    lc.description,
                    ProviderModel(lc.provider, models, describe),
                    lc.instruction,
                    tools,
                    output_key=lc.output_key,
                    max_tool_rounds=lc.max_tool_rounds,
                    tool_context=tool_context,
                    toolsets=toolsets,
                )
            )
        except (TypeError, ValueError) as exc:
            raise _invalid(f"agents.llm.{name}: {_why(exc)}") from None
    for name, path in cfg.components.items():
        obj = _load(load, path, f"agents.components.{name}")
        agent = obj if isinstance(obj, Agent) else (obj() if callable(obj) else None)
        if not isinstance(agent, Agent) or agent.name != name:
            raise _invalid(f"agents.components.{name}: {path!r} must be an Agent named {name!r}")
        registry.add(agent)
    pending = dict(cfg.planners)
    while pending:
        ready = [n for n, pc in pending.items() if all(s not in pending for s in pc.sub_agents)]
        if not ready:
            raise _invalid(
                "agents.planners: sub_agents form a cycle: " + ", ".join(sorted(pending))
            )
        for name in ready:
            pc = pending.pop(name)
            subs = []
            for sub in pc.sub_agents:
                try:
                    subs.append(registry.get(sub))
                except PhloemError:
                    raise _invalid(f"agents.planners.{name}: unknown sub-agent {sub!r}") from None
            try:
                factory = planner_factory(name, pc, subs, models, describe)
                registry.add(
                    PlannerAgent(
                        name,
                        pc.description,
                        factory,
                        subs,
                        pc.max_iterations,
                        on_agent_error=pc.on_agent_error,
                    )
                )
            except (TypeError, ValueError) as exc:
                raise _invalid(f"agents.planners.{name}: {_why(exc)}") from None
    return registry


def contracts_for(name: str, pc: Any, subs: list[Agent]) -> list[AgentMetadata]:
    """Contracts of a goal-oriented or P2P planner: explicit ones, else FunctionAgent keys."""
    out = []
    explicit: Mapping[str, Any] = pc.contracts
    for agent in subs:
        c = explicit.get(agent.name)
        if c is not None:
            out.append(AgentMetadata(agent.name, c.input_keys, c.output_key))
        elif isinstance(agent, FunctionAgent) and agent.output_key:
            out.append(AgentMetadata(agent.name, agent.input_keys, agent.output_key))
        else:
            raise _invalid(f"agents.planners.{name}: no contract for sub-agent {agent.name!r}")
    return out


def planner_factory(
    name: str,
    pc: Any,
    subs: list[Agent],
    models: Callable[[str], Model] = _no_models,
    describe: Callable[[str], Mapping[str, str]] | None = None,
) -> Callable[[], Planner]:
    kind = pc.planner
    if kind == "supervisor":
        if not pc.provider:
            raise _invalid(f"agents.planners.{name}: supervisor needs a provider")
        model = ProviderModel(pc.provider, models, describe)
        system, events, calls = pc.system_instruction, pc.max_events, pc.max_model_calls
        return lambda: SupervisorPlanner(model, system, events, calls)
    if kind == "sequential":
        return SequentialPlanner
    if kind == "parallel":
        return ParallelPlanner
    if kind == "loop":
        cycles = pc.max_cycles
        return lambda: LoopPlanner(cycles)
    meta = contracts_for(name, pc, subs)
    if kind == "p2p":
        cap = pc.max_invocations
        return lambda: P2PPlanner(meta, cap)
    if kind == "goal_oriented":
        if not pc.goal:
            raise _invalid(f"agents.planners.{name}: goal_oriented needs a goal")
        search = AStarSearch() if pc.search == "astar" else DfsSearch()
        policy = {
            "ignore": ReplanPolicy.ignore(),
            "fail_stop": ReplanPolicy.fail_stop(),
        }.get(pc.replan) or ReplanPolicy.replan(pc.max_replans)
        goal, fresh = pc.goal, pc.fresh_outputs
        GoalOrientedPlanner(goal, meta, search, policy, fresh_outputs=fresh)  # validate now
        return lambda: GoalOrientedPlanner(goal, meta, search, policy, fresh_outputs=fresh)
    raise _invalid(f"agents.planners.{name}: unknown planner {kind!r}")


def planned_groups(agent: Agent, state: Mapping[str, Any]) -> list[list[str]]:
    """What `agent` would run first, without running anything (`phloem agent plan`)."""
    if not isinstance(agent, PlannerAgent):
        return [[agent.name]]
    planner = agent.new_planner()
    names = [a.name for a in agent.sub_agents]
    if isinstance(planner, GoalOrientedPlanner):
        return planner.groups(state)
    if isinstance(planner, SequentialPlanner | LoopPlanner):
        return [[n] for n in names]
    if isinstance(planner, ParallelPlanner):
        return [names] if names else []
    raise PhloemError(
        ErrorKind.PLAN_UNAVAILABLE,
        f"agent {agent.name!r} decides as it goes ({type(planner).__name__}); no plan ahead",
    )
