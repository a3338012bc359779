"""The one agent catalogue: every agent of a tree by name, built from the `[agents]` config
or registered in code.

Configured agents are trusted code named in the daemon config — FunctionAgents as
`module:attribute` callables, LlmAgents on configured providers with the tools the one
tool assembly gives them (`phloem.agents.assembly`), other agents as `module:attribute`
of an `Agent` (or a zero-argument factory returning one), and PlannerAgents assembled
from those by name with one of the built-in planners. Requests only ever name a
registered agent; nothing from a request is imported.

Every surface resolves agents here: agent runs, session turns (which build the agent anew
on the session's workspace from its `LlmAgentSpec`), eval runs, `mcp serve --agents`, the
web view. An LLM agent whose capabilities need a workspace and that has no `workdir` runs
only in a session; any other run of it is `invalid_argument`, saying so.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from phloem.agents.agent import Agent
from phloem.agents.assembly import ToolAssembly
from phloem.agents.conversation import DEFAULT_CODING_INSTRUCTION, ConversationAgent
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
from phloem.agents.settings import AgentsConfig, LlmAgentSpec
from phloem.instructions.skills import SkillCatalog
from phloem.models.providers import ProviderModel
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.model import Model
from phloem.protocols.warnings import Warnings
from phloem.supervision.spec import Limits
from phloem.tools.contract import ToolContext
from phloem.tools.settings import ToolsConfig
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


def _no_models(name: str) -> Model:
    raise PhloemError(ErrorKind.UNKNOWN_PROVIDER, f"no provider named {name!r} is configured")


def _load(load: Callable[[str], Any], path: str, where: str) -> Any:
    """`load(path)`; a failure names the config key (`agents.functions.NAME.fn`) too."""
    try:
        return load(path)
    except PhloemError as exc:
        raise PhloemError(exc.kind, f"{where}: {exc.message}", exc.details) from exc


class AgentCatalogue:
    """A tree's agents (the registry) with the specs of its configured LLM agents, the tool
    assembly they were built with, and the models they call. Thread-safe for reads;
    registering goes through `registry.add`."""

    def __init__(
        self,
        registry: AgentRegistry,
        specs: Mapping[str, LlmAgentSpec],
        assembly: ToolAssembly,
        models: Callable[[str], Model] = _no_models,
        describe: Callable[[str], Mapping[str, str]] | None = None,
        session_only: Mapping[str, str] | None = None,
    ) -> None:
        self.registry = registry
        self.specs = dict(specs)
        self.assembly = assembly
        self._models = models
        self._describe = describe
        self._session_only = dict(session_only or {})

    def names(self) -> list[str]:
        return sorted({*self.registry.names(), *self._session_only})

    def agent(self, name: str) -> Agent:
        """The agent called `name` for a run outside a session (`unknown_agent` if none;
        `invalid_argument` for an agent that runs only in a session)."""
        why = self._session_only.get(name)
        if why is not None and name not in self.registry.names():
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, why)
        return self.registry.get(name)

    def spec(self, name: str) -> LlmAgentSpec | None:
        """The resolved `[agents.llm.NAME]` entry of `name`; None for any other agent."""
        return self.specs.get(name)

    def llm_spec(self, name: str) -> LlmAgentSpec:
        """The spec of the configured LLM agent `name` (`unknown_agent` for any other)."""
        spec = self.specs.get(name)
        if spec is None:
            llm = ", ".join(sorted(self.specs)) or "none"
            raise PhloemError(
                ErrorKind.UNKNOWN_AGENT,
                f"no LLM agent named {name[:80]!r} ([agents.llm.NAME]; configured: {llm})",
            )
        return spec

    def model(self, spec: LlmAgentSpec) -> ProviderModel:
        return ProviderModel(spec.config.provider, self._models, self._describe)

    def build(
        self,
        spec: LlmAgentSpec,
        tool_context: ToolContext,
        *,
        conversation: bool = False,
        warnings: Warnings | None = None,
        skills: SkillCatalog | None = None,
    ) -> LlmAgent:
        """`spec`'s agent on `tool_context`'s workspace (None: no workspace tools): an
        `LlmAgent`, or with `conversation` a `ConversationAgent` (a session's turn)."""
        workdir = str(tool_context.workspace.root) if tool_context.has_workspace else None
        if workdir is None and spec.needs_workspace:
            raise ValueError(
                f"its tools, instructions, skills and templates need a workspace: set "
                f"[agents.llm.{spec.name}] workdir, or run it in a session"
            )
        tools = self.assembly.for_agent(spec, workdir, warnings, skills)
        config = spec.config
        instruction = config.instruction or (DEFAULT_CODING_INSTRUCTION if config.harness else "")
        cls = ConversationAgent if conversation else LlmAgent
        return cls(
            spec.name,
            config.description,
            self.model(spec),
            instruction,
            tools.tools,
            output_key=config.output_key,
            max_tool_rounds=spec.max_tool_rounds,
            generate_config=config.generate_config(),
            tool_context=tool_context,
            toolsets=tools.toolsets,
        )


def _workspace_context(spec: LlmAgentSpec, tools: ToolsConfig | None) -> ToolContext | None:
    """The tool context of `spec`'s runs outside a session: its `workdir` (None: none),
    with the `[tools]` per-call output policy (no session budget: these runs are not a
    conversation, and a budget shared by every run would run out in a long-lived daemon)."""
    if not spec.config.workdir:
        return None
    workdir = os.path.expanduser(spec.config.workdir)
    if not os.path.isdir(workdir):
        raise ValueError(f"workdir is not a directory: {spec.config.workdir}")
    tools = tools or ToolsConfig()
    return ToolContext(workspace=Workspace(workdir), policy=tools.output_policy())


def build_catalogue(
    cfg: AgentsConfig,
    load: Callable[[str], Any],
    models: Callable[[str], Model] = _no_models,
    assembly: ToolAssembly | None = None,
    describe: Callable[[str], Mapping[str, str]] | None = None,
) -> AgentCatalogue:
    """The catalogue of an `[agents]` config section; `load` resolves `module:attribute`,
    `models` a provider name to its model, `assembly` makes the LLM agents' tools. A
    component that cannot be loaded is an error naming its key path
    (`agents.functions.NAME.fn: cannot load agent 'mod:fn': ...`)."""
    assembly = assembly or ToolAssembly()
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
    specs = {name: lc.spec(name) for name, lc in cfg.llm.items()}
    session_only = {
        name: (
            f"agent {name!r} runs only in a session: its tools, instructions, skills and "
            f"templates need a workspace (set [agents.llm.{name}] workdir)"
        )
        for name, spec in specs.items()
        if spec.needs_workspace and not spec.config.workdir
    }
    catalogue = AgentCatalogue(registry, specs, assembly, models, describe, session_only)
    for name, spec in specs.items():
        try:
            if name in session_only:
                assembly.for_agent(spec, None)  # its tool names are checked all the same
                continue
            context = _workspace_context(spec, assembly.tools_config)
            registry.add(catalogue.build(spec, context or ToolContext()))
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
                    subs.append(catalogue.agent(sub))
                except PhloemError as exc:
                    why = exc.message if sub in session_only else f"unknown sub-agent {sub!r}"
                    raise _invalid(f"agents.planners.{name}: {why}") from None
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
    return catalogue


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
