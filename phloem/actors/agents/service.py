"""The `agents` service: list, plan, run and cancel agents by name.

Requests (msgspec, tagged): `ListAgents`, `PlanAgent(name, state)`,
`StartAgentRun(name, input, state, tools_allow, tools_deny)`, `CancelAgentRun(ref)` and
`ConfirmAgentRun(ref, call_id, approve)`. A started run answers
`AgentRunStarted(ref, stream)`: the ref is bound to the calling client (another client
gets `not_owner`; when the client goes away the run is cancelled) and the stream
`agents/<ref>` carries `AgentRunEvent`s as they happen and one final `AgentRunEnd`
with the whole `AgentRun`, under the subscriber's credit.

A configured LLM agent's run gets its own interceptors after the tree's: its tool policy
(`[agents.llm.NAME] tools_allow` / `tools_deny` ∩ the request's), confirmation
(`confirmation = true`: the stream carries a `ConfirmRequest` for each mutating tool call
and the run waits for the owner's `ConfirmAgentRun`; a cancelled run or a vanished owner
refuses) and its workspace's instructions (`instructions = true`), all from
`phloem.instructions`. The run's warnings come back in `AgentRun.warnings`.

Credential-shaped state keys (`api_key`, `password`, ... — token *counts* are kept) are
pruned from every event and from the final state before they leave the service.

In the tree the service is `agents/service`, next to `agents/runs`: every run gets its
own supervisor there (`agent-run:<run>`), holding the run's driver actor and one
temporary actor per sub-agent invocation, so `phloem tree` shows every live run. At
most `max_concurrent_runs` runs are live; beyond that a start is refused with `backpressure`.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from phloem.actors.agents.protocol import (
    AgentInfo,
    AgentPlan,
    AgentRequest,
    AgentRunEnd,
    AgentRunEvent,
    AgentRunStarted,
    CancelAgentRun,
    ConfirmAgentRun,
    ListAgents,
    LookupAgent,
    PlanAgent,
    RegisterAgent,
    StartAgentObject,
    StartAgentRun,
)
from phloem.actors.reload import ReloadContext, register_reloader
from phloem.actors.services import Call, Resources, ServiceActor, ServiceContext, register_service
from phloem.actors.streams import RUN_STREAM_SEND_TIMEOUT_S, RunStreamForwarder, Topic
from phloem.agents.agent import Agent
from phloem.agents.context import CancelToken
from phloem.agents.llm_agent import LlmAgent
from phloem.agents.planner_agent import PlannerAgent
from phloem.agents.public import public_event, public_run
from phloem.agents.registry import AgentRegistry, build_registry, planned_groups
from phloem.agents.runner import run_agent
from phloem.agents.supervised import SupervisedExecutor
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.instructions.confirm import ConfirmationInterceptor
from phloem.instructions.context import run_interceptors
from phloem.instructions.discovery import InstructionContext
from phloem.instructions.policy import ToolPolicy
from phloem.instructions.protocol import ConfirmRequest
from phloem.instructions.settings import InstructionsConfig
from phloem.models.interceptors import NO_INTERCEPTORS, CallInfo, Interceptors
from phloem.models.providers import ProviderRegistry
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.refs import RefKind
from phloem.protocols.warnings import Warnings
from phloem.supervision import (
    Actor,
    ChildHandle,
    ChildSpec,
    ExitReason,
    Supervisor,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    sibling_of,
)
from phloem.supervision.actor import tell_if_alive
from phloem.supervision.refs import Owner
from phloem.tools.toolset import SourceToolset, Toolset

log = get_logger("phloem.agents")

SERVICE_NAME = "agents"
RELOAD_TIMEOUT_S = 30.0  # building the agents of a re-read config
SERVICE_ID = "service"  # clients ask `agents/service`
RUNS_ID = "runs"
SERVICE_PATH = f"{SERVICE_NAME}/{SERVICE_ID}"
RUN_REF_KIND = RefKind(
    "agent_run",
    prefix="agentrun_",
    invalid_error=ErrorKind.INVALID_REF,
    not_owner_error=ErrorKind.NOT_OWNER,
)
MAX_AGENT_INPUT_CHARS = 100_000


def info_of(agent: Agent) -> AgentInfo:
    if isinstance(agent, PlannerAgent):
        return AgentInfo(
            agent.name,
            "planner",
            agent.description,
            [a.name for a in agent.sub_agents],
            agent.max_iterations,
        )
    return AgentInfo(agent.name, type(agent).__name__, agent.description)


# --- runs -------------------------------------------------------------------------------


@dataclass
class _Run:
    id: str
    ref: str
    agent: Agent
    token: CancelToken
    executor: SupervisedExecutor
    topic: Topic | None
    interceptors: Interceptors = NO_INTERCEPTORS
    trace: Any = None  # the starting request's trace context (phloem.base.telemetry.capture)
    # Per run (phloem.instructions): the turn's tool policy, confirmation of
    # mutating tools, the workspace whose instructions are discovered, the warnings.
    policy: ToolPolicy | None = None
    by_agent: dict[str, ToolPolicy] = field(default_factory=dict)
    confirm: ConfirmationInterceptor | None = None
    instructions_dir: str | None = None
    warnings: Warnings = field(default_factory=Warnings)

    def chain(self, instructions: InstructionsConfig) -> Interceptors:
        """The tree's interceptors, then this run's own (policy, confirmation,
        instructions); discovery happens here, in the run's thread."""
        context = None
        if self.instructions_dir is not None:
            context = InstructionContext(
                self.instructions_dir, config=instructions, warnings=self.warnings
            )
        policy = None if self.policy is None or self.policy.unrestricted else self.policy
        own = run_interceptors(
            policy=policy, context=context, confirmation=self.confirm, by_agent=self.by_agent
        )
        if not own:
            return self.interceptors
        return Interceptors((*self.interceptors.items, *own))


class _Finished:
    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id


class _Reconfigure:
    """Internal: rebuild providers and configured agents from a re-read config."""

    __slots__ = ("config",)

    def __init__(self, config: Any) -> None:
        self.config = config


class AgentRunDriver(Actor):
    """Drives one run: waits for the subscriber, runs the agent, streams, ends the topic."""

    max_inbox = 4

    def __init__(
        self, run: _Run, request: StartAgentRun, instructions: InstructionsConfig | None = None
    ) -> None:
        super().__init__()
        self.run = run
        self.request = request
        self.instructions = instructions or InstructionsConfig()

    def on_receive(self, message: Any) -> Any:
        if message != "go":
            return None
        run, topic = self.run, self.run.topic
        assert topic is not None
        forward = RunStreamForwarder(
            topic, lambda event: AgentRunEvent(public_event(event)), run.token.cancel
        )

        reason: ExitReason | None = None
        try:
            topic.stream.wait_for_subscribers(1, self.request.subscribe_wait_s)
            with telemetry.use(run.trace):
                result = run_agent(
                    run.agent,
                    input=self.request.input,
                    state=self.request.state,
                    executor=run.executor,
                    cancel=run.token,
                    on_event=forward,
                    interceptors=run.chain(self.instructions),
                )
            if run.confirm is not None:
                run.confirm.close("the run ended")
            if forward.failed is None:
                warnings = (*result.warnings, *run.warnings.drain())
                end = msgspec.structs.replace(
                    public_run(result), events=(), warnings=warnings
                )  # the events were sent one by one
                topic.send(AgentRunEnd(end), timeout=RUN_STREAM_SEND_TIMEOUT_S)
        except PhloemError as exc:
            log.warning("agent_run_end_undelivered", run=run.id, kind=exc.kind)
        except Exception as exc:
            log.error("agent_run_driver_failed", run=run.id, error=type(exc).__name__)
            reason = ExitReason.from_exception(exc)
        finally:
            if run.confirm is not None:
                run.confirm.close("the run ended")
            topic.close(reason)
        self.exit(reason or ExitReason.normal())
        return None


class AgentService(ServiceActor):
    """The `agents` service (see the module docstring)."""

    request_type = AgentRequest

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        config = ctx.latest()
        self.providers, self.registry = _configured(config, ctx.resources)
        self._from_config = set(self.registry.names())
        self.instructions: InstructionsConfig = config.instructions
        self.llm_config: dict[str, Any] = dict(config.agents.llm)
        self._retired: list[ProviderRegistry] = []  # in use by runs started before a reload
        self.max_runs: int = config.agents.max_concurrent_runs
        self.invocation_timeout_s: float = config.agents.invocation_timeout_s
        self.runs: dict[str, _Run] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sup: SupervisorRef | None = None
        self._own_sup: SupervisorRef | None = None
        ctx.refs.define_kind(RUN_REF_KIND)  # idempotent across restarts of this service

    def runs_supervisor(self) -> SupervisorRef:
        """The `runs` supervisor next to this service in the tree (found on first use);
        outside a tree (no sibling), one of its own."""
        if self._sup is None or not self._sup.is_alive():
            handle = self._phloem_handle
            sibling = find_sibling(handle, RUNS_ID) if handle is not None else None
            if sibling is None:
                self._own_sup = Supervisor.start(
                    SupervisorSpec(strategy="one_for_one", intensity=0), [], name="agents.runs"
                )
                sibling = self._own_sup
            self._sup = sibling
        return self._sup

    def on_stop(self) -> None:
        for run in list(self.runs.values()):
            run.token.cancel("service stopping")
        if self._own_sup is not None:
            self._own_sup.stop(timeout=10.0)
        self.providers.close()
        self._close_retired()
        super().on_stop()

    # -- requests --------------------------------------------------------------------------

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, ListAgents):
            return [info_of(a) for a in self.registry.all()]
        if isinstance(message, PlanAgent):
            agent = self.registry.get(message.name)
            return AgentPlan(agent.name, planned_groups(agent, message.state))
        if isinstance(message, StartAgentRun):
            return self._start(message, call.owner)
        if isinstance(message, CancelAgentRun):
            run = self.ctx.refs.resolve(message.ref, call.owner, RUN_REF_KIND.name)
            assert isinstance(run, _Run)
            run.token.cancel("cancelled by its owner")
            return {"cancelled": message.ref}
        if isinstance(message, ConfirmAgentRun):
            run = self.ctx.refs.resolve(message.ref, call.owner, RUN_REF_KIND.name)
            assert isinstance(run, _Run)
            if run.confirm is None or not run.confirm.answer(message.call_id, message.approve):
                raise PhloemError(
                    ErrorKind.UNKNOWN_CALL,
                    f"no tool call {message.call_id[:80]!r} is waiting for confirmation",
                )
            return {"call_id": message.call_id, "approve": message.approve}
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"unexpected request {type(message).__name__}")

    def on_other(self, message: Any) -> Any:
        if isinstance(message, _Finished):
            run = self.runs.pop(message.run_id, None)
            if run is not None:
                self.ctx.refs.discard(run.ref)
                run.executor.close()
            if not self.runs:
                self._close_retired()
            return None
        if isinstance(message, _Reconfigure):
            return self._reconfigure(message.config)
        if isinstance(message, RegisterAgent):
            return self.registry.add(message.agent, replace=message.replace).name
        if isinstance(message, StartAgentObject):
            return self._start(message.request, message.owner, message.agent)
        if isinstance(message, LookupAgent):
            return self.registry.get(message.name)
        return None

    def _reconfigure(self, config: Any) -> list[str]:
        """Providers and configured agents from `config` (SIGHUP): built whole first, so a
        bad config changes nothing; agents registered in code stay; runs already going
        keep the agents and models they started with."""
        providers, registry = _configured(config, self.ctx.resources)
        from_config = set(registry.names())
        for agent in self.registry.all():
            if agent.name not in self._from_config and agent.name not in from_config:
                registry.add(agent)
        old, self.providers, self.registry = self.providers, providers, registry
        self._from_config = from_config
        self.max_runs = config.agents.max_concurrent_runs
        self.invocation_timeout_s = config.agents.invocation_timeout_s
        self.instructions = config.instructions
        self.llm_config = dict(config.agents.llm)
        self._retired.append(old)
        if not self.runs:
            self._close_retired()
        log.info("agents_reconfigured", agents=registry.names(), providers=providers.names())
        return registry.names()

    def _close_retired(self) -> None:
        retired, self._retired = self._retired, []
        for providers in retired:
            providers.close()

    def _start(
        self, request: StartAgentRun, owner: Owner, agent: Agent | None = None
    ) -> AgentRunStarted:
        """Start a run of `agent` (an object, from an embedded tree) or, without one, of
        the agent registered as `request.name`."""
        named = agent is None
        if agent is None:
            agent = self.registry.get(request.name)
        if request.input is not None and len(request.input) > MAX_AGENT_INPUT_CHARS:
            raise PhloemError(
                ErrorKind.BAD_MESSAGE, f"input must be at most {MAX_AGENT_INPUT_CHARS} chars"
            )
        check_range(
            "subscribe_wait_s",
            request.subscribe_wait_s,
            0,
            60,
            kind=ErrorKind.BAD_MESSAGE,
            integer=False,
        )
        if len(self.runs) >= self.max_runs:
            raise PhloemError(
                ErrorKind.BACKPRESSURE,
                f"{len(self.runs)} agent runs live; max_concurrent_runs reached",
            )
        runs = self.runs_supervisor()
        run_id = f"{agent.name}-{next(self._ids)}"
        token = CancelToken()
        executor = SupervisedExecutor(
            run_id,
            parent=runs,
            invocation_timeout_s=self.invocation_timeout_s,
            launcher=self.ctx.resources.launcher("isolated_agents"),
        )
        run = _Run(
            run_id,
            "",
            agent,
            token,
            executor,
            None,
            self.ctx.interceptors.chain(),
            telemetry.capture(),
        )
        self._configure(run, request, named)
        me = self.actor_ref
        ref = None
        try:
            ref = self.ctx.refs.create(
                owner, run, lambda reason: token.cancel(str(reason)), RUN_REF_KIND.name
            )
            run.ref = ref.text
            run.topic = self.open_topic(f"agents/{ref.text}", owner=owner)
            driver = executor.supervisor.start_child(
                ChildSpec(
                    "driver",
                    (AgentRunDriver, (run, request, self.instructions), {}),
                    restart="temporary",
                )
            )
        except Exception:
            if ref is not None:
                self.ctx.refs.discard(ref.text)
            if run.topic is not None:
                run.topic.close()
            executor.close()
            raise
        driver.add_exit_callback(lambda reason: tell_if_alive(me, _Finished(run_id)))
        self.runs[run_id] = run
        driver.tell("go")  # type: ignore[attr-defined]
        log.info("agent_run_started", run=run_id, agent=agent.name)
        return AgentRunStarted(run.ref, run.topic.name)

    def _configure(self, run: _Run, request: StartAgentRun, named: bool) -> None:
        """The run's tool policy, confirmation and instruction discovery: the request's
        policy for every agent of the run; for a configured agent, each configured LLM
        agent in it (the agent itself, a planner's sub-agents) keeps its own
        `[agents.llm.NAME]` policy and confirmation; the workspace of the agent run
        (when it is a configured LLM agent with `instructions = true`) gives the
        instructions."""
        run.policy = ToolPolicy.of(request.tools_allow, request.tools_deny)
        if not named:
            return
        confirming: dict[str, float] = {}
        for name in llm_agent_names(run.agent):
            lc = self.llm_config.get(name)
            if lc is None:
                continue
            own = ToolPolicy.of(lc.tools_allow, lc.tools_deny)
            if not own.unrestricted:
                run.by_agent[name] = own
            if lc.confirmation:
                confirming[name] = lc.confirmation_timeout_s
        top = self.llm_config.get(run.agent.name)
        if top is not None and top.instructions:
            run.instructions_dir = os.path.expanduser(top.workdir)
        if confirming:
            table = tool_table(run.agent)

            def send(item: ConfirmRequest) -> None:
                assert run.topic is not None
                run.topic.send(item, timeout=RUN_STREAM_SEND_TIMEOUT_S)

            confirm = ConfirmationInterceptor(send, tools=table, agents=confirming)
            run.confirm = confirm
            run.token.on_cancel(lambda: confirm.close(f"run cancelled: {run.token.reason}"))


def llm_agent_names(agent: Agent) -> list[str]:
    """The names of the LLM agents in `agent`'s tree (itself included)."""
    names: list[str] = []
    stack = [agent]
    while stack:
        current = stack.pop()
        if isinstance(current, LlmAgent):
            names.append(current.name)
        stack.extend(current.sub_agents)
    return names


def tool_table(agent: Agent) -> Callable[[CallInfo, str], object | None]:
    """The lookup of a tool by (calling agent, tool name) over `agent`'s tree: an LLM
    agent's own tools, then its toolsets' tools of the moment (MCP tools; by the time
    one is called, its toolset has listed it)."""
    agents: dict[str, LlmAgent] = {}
    stack = [agent]
    while stack:
        current = stack.pop()
        if isinstance(current, LlmAgent):
            agents.setdefault(current.name, current)
        stack.extend(current.sub_agents)

    def lookup(info: CallInfo, name: str) -> object | None:
        owner = agents.get(info.agent)
        if owner is None:
            return None
        for tool in owner.tools:
            if tool.name == name:
                return tool
        for toolset in owner.toolsets:
            for tool in toolset.tools():
                if tool.name == name:
                    return tool
        return None

    return lookup


def agents_factory(ctx: ServiceContext) -> ChildSpec:
    """`agents`: a supervisor holding `runs` (one child supervisor per run) and `service`."""
    return ChildSpec(
        SERVICE_NAME,
        SupervisorChild(
            SupervisorSpec(strategy="one_for_one", intensity=3),
            [
                ChildSpec(RUNS_ID, SupervisorChild(SupervisorSpec(intensity=0))),
                ChildSpec(SERVICE_ID, (AgentService, (ctx,), {}), shutdown=15.0),
            ],
        ),
    )


def find_sibling(handle: ChildHandle, sibling_id: str) -> SupervisorRef | None:
    """The supervisor `sibling_id` next to `handle`, if it is running."""
    sibling = sibling_of(handle, sibling_id)
    return sibling if isinstance(sibling, SupervisorRef) else None


def _configured(config: Any, resources: Resources) -> tuple[ProviderRegistry, AgentRegistry]:
    """The provider registry and the agents a config declares (their MCP toolsets reach
    the tree's MCP hub through `resources.mcp`)."""
    from phloem.base.settings import load_component

    known = {*config.mcp.servers, *config.mcp.allow_foreign}

    def mcp_toolset(servers: list[str]) -> Toolset:
        unknown = [name for name in servers if name not in known]
        if unknown:
            raise ValueError(f"mcp_servers names unconfigured MCP servers: {', '.join(unknown)}")
        return SourceToolset("mcp", lambda: resources.mcp, servers)

    providers = ProviderRegistry(config.providers)
    registry = build_registry(
        config.agents,
        lambda path: load_component(path, what="agent"),
        providers.get,
        config.instructions,
        mcp_toolset,
        describe=providers.describe,
    )
    return providers, registry


def _reload(ctx: ReloadContext) -> None:
    """The reloader of `[agents]` and `[providers]`: the running service rebuilds both."""
    handle = ctx.actor(SERVICE_PATH)
    if handle is not None:
        handle.ask(_Reconfigure(ctx.new), timeout=RELOAD_TIMEOUT_S)


register_service(SERVICE_NAME, agents_factory)
register_reloader(SERVICE_NAME, ("agents", "providers"), _reload)
