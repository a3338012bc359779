"""The `agents` service: list, plan, run and cancel agents by name.

Requests (msgspec, tagged): `ListAgents`, `PlanAgent(name, state)`,
`StartAgentRun(name, input, state, tools_allow, tools_deny)`, `CancelAgentRun(ref)` and
`ConfirmAgentRun(ref, call_id, approve)`. A started run answers
`AgentRunStarted(ref, stream)` at once: it is a run of the one run lifecycle
(`phloem.actors.runs`) — the ref is bound to the calling client (another client gets
`not_owner`; when the client goes away the run is cancelled) and the stream
`agents/<ref>` carries an `agent_event` `RunEvent` per event (the `Event`) and one
final `RunEnd` with the whole `AgentRun` (its events sent one by one before), under the
subscriber's credit; what comes before the client subscribes waits for it.

A configured LLM agent's run gets its own interceptors after the tree's: its tool policy
(`[agents.llm.NAME] tools_allow` / `tools_deny` ∩ the request's), confirmation
(`confirmation = true`: the stream carries a `ConfirmRequest` for each mutating tool call
and the run waits for the owner's `ConfirmAgentRun`; a cancelled run or a vanished owner
refuses) and its workspace's instructions (`instructions = true`), all from
`phloem.instructions`. The run's warnings come back in `AgentRun.warnings`.

Credential-shaped state keys (`api_key`, `password`, ... — token *counts* are kept) are
pruned from every event and from the final state before they leave the service.

In the tree the service is `agents/service`, next to `agents/runs`: every run gets its
own supervisor there (`agent-run:<run>`), holding the run's driver and one temporary
actor per sub-agent invocation, so `phloem tree` shows every live run. The driver of an
agent that says `fiber_safe` (an `LlmAgent`) is a `FiberDriver`: the run is a fiber,
parked without a thread while it waits on its model, a confirmation or a tool; any
other agent's is a `RunDriver`, on a thread of its own. At
most `max_concurrent_runs` runs are live; beyond that a start is refused with `backpressure`.

A durable run (`StartAgentRun.durable`, `durable`) is journaled under
`[planning] journal_dir` (kind `agent`) by a `durable.JournalInterceptor`, innermost in
its chain; its owner going away detaches it; when the service starts, every unfinished
agent journal is started again (detached) and replays its recorded model responses and
tool results, at most `[planning] resume_concurrency` at once. Its end, with the whole
`AgentRun`, stays in the journal for `retention_s`. `AttachAgentRun(run_id)` binds a
durable run to a caller of the starter's uid (`AgentRunStarted`, a fresh ref and stream;
another uid `not_planning_owner`), `ListDurableAgentRuns` lists the caller's uid's.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from phloem.actors.agents.delegation import AgentDelegation
from phloem.actors.agents.durable import JournalInterceptor
from phloem.actors.agents.protocol import (
    AgentInfo,
    AgentPlan,
    AgentRequest,
    AgentRunStarted,
    AttachAgentRun,
    CancelAgentRun,
    ConfirmAgentRun,
    DelegateAgentRun,
    ListAgents,
    ListDurableAgentRuns,
    ListProviders,
    PlanAgent,
    RegisterAgent,
    StartAgentObject,
    StartAgentRun,
)
from phloem.actors.reload import ReloadContext, register_reloader
from phloem.actors.runs import FiberDriver, Run, RunDriver, ServiceRuns, outcome_of
from phloem.actors.runs.journal import (
    DurableRunInfo,
    RunJournal,
    check_owner,
    planning_journals,
)
from phloem.actors.services import Call, Resources, ServiceActor, ServiceContext, register_service
from phloem.agents.agent import Agent
from phloem.agents.catalogue import AgentCatalogue, build_catalogue, planned_groups
from phloem.agents.context import CancelToken
from phloem.agents.events import Event
from phloem.agents.outcome import PlannerOutcome
from phloem.agents.planner_agent import PlannerAgent
from phloem.agents.preparation import RunPrep, prepare
from phloem.agents.public import event_note, public_event, public_run
from phloem.agents.runner import AgentRun, run_agent
from phloem.agents.supervised import SupervisedExecutor
from phloem.base.logs import get_logger
from phloem.instructions.policy import ToolPolicy
from phloem.models.interceptors import NO_INTERCEPTORS, Interceptors
from phloem.models.providers import ProviderRegistry
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.refs import RefKind
from phloem.protocols.runs import ConfirmRequest
from phloem.supervision import (
    ChildHandle,
    ChildSpec,
    ExitReason,
    Supervisor,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    sibling_of,
)
from phloem.supervision.refs import Owner

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
RUNS_ON_FIBERS = True
"""Drive `fiber_safe` agents' runs as fibers (False: every run on a thread of its own)."""


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
    """What the agents service keeps of one run (the lifecycle's `Run.context`)."""

    id: str
    agent: Agent
    token: CancelToken
    executor: SupervisedExecutor
    interceptors: Interceptors = NO_INTERCEPTORS
    lifecycle: Run | None = None  # set when the run starts
    # What the run adds to the tree's chain: its tool policy, confirmation, instructions,
    # templates and their warnings (phloem.agents.preparation).
    prep: RunPrep | None = None
    # A delegated run's (`DelegateAgentRun`): told the finished run when the driver is gone.
    on_end: Callable[[AgentRun | None], None] | None = None
    final: AgentRun | None = None

    def chain(self) -> Interceptors:
        """The tree's interceptors, then this run's own; the instructions are discovered
        here, in the run's thread."""
        return self.prep.chain(self.interceptors) if self.prep is not None else self.interceptors

    def close_confirmations(self) -> None:
        if self.prep is not None:
            self.prep.close("the run ended")


class _Reconfigure:
    """Internal: rebuild providers and configured agents from a re-read config."""

    __slots__ = ("config",)

    def __init__(self, config: Any) -> None:
        self.config = config


def drive(state: _Run, request: StartAgentRun, run: Run) -> None:
    """The work of one agent run (its `RunDriver`'s): run the agent, each event to the
    run's stream as it happens, then the `AgentRun` as the end."""

    def on_event(event: Event) -> None:
        public = public_event(event)
        run.emit("agent_event", public, event_note(public), record=not public.partial)

    journal = run.journal
    if journal is not None and journal.end is not None:  # attached after its end
        state.close_confirmations()
        replay_end(run, journal.end)
        return
    try:
        text = request.input
        if text is not None and state.prep is not None:
            text = state.prep.expand(text)  # `/name args`
        result = run_agent(
            state.agent,
            input=text,
            state=request.state,
            executor=state.executor,
            cancel=run.token,
            on_event=on_event,
            interceptors=state.chain(),
        )
    finally:
        state.close_confirmations()
    extra = state.prep.drain() if state.prep is not None else []
    whole = msgspec.structs.replace(public_run(result), warnings=(*result.warnings, *extra))
    state.final = whole
    end = msgspec.structs.replace(whole, events=())  # the events were sent one by one
    outcome = result.outcome
    run.end(outcome_of(outcome.status), error=outcome_error(outcome), result=end)


def replay_end(run: Run, end: dict[str, Any]) -> None:
    """End `run` as its journal's end record says (a retained run attached to again)."""
    data = end.get("result")
    try:  # the journal's copy was secret-pruned: `session_id` is a credential-shaped key
        if not isinstance(data, dict):
            raise msgspec.ValidationError("no result")  # a failed end (journal full)
        result = msgspec.convert({"session_id": "", **data}, AgentRun)
    except msgspec.ValidationError:
        kind = str(end.get("error") or ErrorKind.RUN_JOURNAL_CORRUPT)
        run.end("failed", error=ErrorValue(kind=kind, message="the run's result is not kept"))
        return
    run.end(outcome_of(result.outcome.status), error=outcome_error(result.outcome), result=result)


def outcome_error(outcome: PlannerOutcome) -> ErrorValue | None:
    """Why a run with this outcome did not end `done` (None when it did)."""
    if outcome.ok:
        return None
    if outcome.error is not None:
        return outcome.error
    return ErrorValue(kind=outcome.status, message=outcome.message)


class AgentService(ServiceActor):
    """The `agents` service (see the module docstring)."""

    request_type = AgentRequest

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        config = ctx.latest()
        self.providers, self.catalogue = _configured(config, ctx.resources)
        ctx.resources.agents = self.catalogue  # every surface resolves agents here
        self._from_config = set(self.catalogue.registry.names())
        self._retired: list[ProviderRegistry] = []  # in use by runs started before a reload
        self.invocation_timeout_s: float = config.agents.invocation_timeout_s
        self.delegation_timeout_s: float = config.agents.delegation_timeout_s
        self.runs = ServiceRuns.of(
            self, "agent", RUN_REF_KIND, max_live=config.agents.max_concurrent_runs
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sup: SupervisorRef | None = None
        self._own_sup: SupervisorRef | None = None
        self.journals = planning_journals(getattr(config, "planning", None), "agent")
        self._to_resume: deque[RunJournal] = deque()  # unfinished, waiting their turn
        self._resumed: set[str] = set()  # durable ids of resumed runs still live

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

    def on_start(self) -> None:
        """Offer the tree's delegation (agents as tools, `phloem.agents.delegation`)."""
        self._delegation = AgentDelegation(
            self.actor_ref,
            self.ctx.refs,
            lambda: self.delegation_timeout_s,
        )
        self.ctx.resources.delegate = self._delegation
        if self.journals is not None:  # scanned before any request is taken
            self._to_resume.extend(self.journals.scan()[0])
            self.journals.prune()
            if self._to_resume:
                self.later(self._resume_more)

    def _resume_more(self) -> None:
        """Start unfinished durable agent runs again, detached, at most
        `resume_concurrency` at once (the next as one ends)."""
        assert self.journals is not None
        limit = self.journals.limits.resume_concurrency
        while self._to_resume and len(self._resumed) < limit:
            self._resume(self._to_resume.popleft())

    def _resume(self, journal: RunJournal) -> Run | None:
        """Start the run of `journal` again, detached: owned by a placeholder owner of
        its uid until someone of that uid attaches (one that has ended replays its end)."""
        try:
            request = msgspec.convert(journal.input, StartAgentRun)
            owner = Owner.client(f"durable {journal.id}", uid=journal.uid)
            run = self._start_run(request, owner, journal=journal)
        except (PhloemError, msgspec.ValidationError) as exc:
            log.error("agent_resume_failed", run=journal.id, error=str(exc))
            return None
        self._resumed.add(journal.id)
        return run

    def _attach(self, run_id: object, owner: Owner) -> AgentRunStarted:
        """Bind the durable run `run_id` to `owner` (same uid only): a live one, one still
        waiting its turn to resume (resumed now), or an ended one still retained."""
        if self.journals is None or not isinstance(run_id, str):
            raise PhloemError(ErrorKind.UNKNOWN_DURABLE_RUN, "no durable run of that id")
        run = self.runs.durable(run_id)
        if run is None:
            journal = self.journals.open(run_id)  # as it is on disk now
            check_owner(owner.uid, journal)
            for queued in [j for j in self._to_resume if j.id == run_id]:
                self._to_resume.remove(queued)
            run = self._resume(journal)
            if run is None:
                raise PhloemError(ErrorKind.UNKNOWN_DURABLE_RUN, f"durable run {run_id} is gone")
        assert run.journal is not None
        check_owner(owner.uid, run.journal)
        return AgentRunStarted(self.runs.attach(run, owner), run.stream, run_id)

    def _durable_runs(self, owner: Owner) -> list[DurableRunInfo]:
        """The durable agent runs kept (journals on disk) of `owner`'s uid, oldest first."""
        return [] if self.journals is None else self.journals.infos(owner.uid, self.runs.durable)

    def on_stop(self) -> None:
        if self.ctx.resources.delegate is getattr(self, "_delegation", None):
            self.ctx.resources.delegate = None
        self.runs.stop()
        if self._own_sup is not None:
            self._own_sup.stop(timeout=10.0)
        self.providers.close()
        self._close_retired()
        super().on_stop()

    # -- requests --------------------------------------------------------------------------

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, ListAgents):
            return self._infos()
        if isinstance(message, ListProviders):
            return self.providers.rows()
        if isinstance(message, PlanAgent):
            agent = self.catalogue.agent(message.name)
            return AgentPlan(agent.name, planned_groups(agent, message.state))
        if isinstance(message, StartAgentRun):
            return self._start(message, call.owner)
        if isinstance(message, AttachAgentRun):
            return self._attach(message.run_id, call.owner)
        if isinstance(message, ListDurableAgentRuns):
            return self._durable_runs(call.owner)
        if isinstance(message, CancelAgentRun):
            self.runs.cancel(message.ref, call.owner)
            return {"cancelled": message.ref}
        if isinstance(message, ConfirmAgentRun):
            run = self.runs.resolve(message.ref, call.owner).context
            assert isinstance(run, _Run)
            confirm = run.prep.confirm if run.prep is not None else None
            if confirm is None or not confirm.answer(message.call_id, message.approve):
                raise PhloemError(
                    ErrorKind.UNKNOWN_CALL,
                    f"no tool call {message.call_id[:80]!r} is waiting for confirmation",
                )
            return {"call_id": message.call_id, "approve": message.approve}
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"unexpected request {type(message).__name__}")

    def on_other(self, message: Any) -> Any:
        if isinstance(message, _Reconfigure):
            return self._reconfigure(message.config)
        if isinstance(message, RegisterAgent):
            return self.catalogue.registry.add(message.agent, replace=message.replace).name
        if isinstance(message, StartAgentObject):
            return self._start(message.request, message.owner, message.agent)
        if isinstance(message, DelegateAgentRun):
            return self._start(message.request, message.owner, on_end=message.on_end)
        return None

    def _reconfigure(self, config: Any) -> list[str]:
        """Providers and configured agents from `config` (SIGHUP): built whole first, so a
        bad config changes nothing; agents registered in code stay; runs already going
        keep the agents and models they started with."""
        providers, catalogue = _configured(config, self.ctx.resources)
        registry = catalogue.registry
        from_config = set(registry.names())
        for agent in self.catalogue.registry.all():
            if agent.name not in self._from_config and agent.name not in from_config:
                registry.add(agent)
        old, self.providers, self.catalogue = self.providers, providers, catalogue
        self.ctx.resources.agents = catalogue
        self._from_config = from_config
        self.runs.max_live = config.agents.max_concurrent_runs
        self.invocation_timeout_s = config.agents.invocation_timeout_s
        self.delegation_timeout_s = config.agents.delegation_timeout_s
        self._retired.append(old)
        if not self.runs.live_count():
            self._close_retired()
        log.info("agents_reconfigured", agents=catalogue.names(), providers=providers.names())
        return catalogue.names()

    def _infos(self) -> list[AgentInfo]:
        """Every agent of the catalogue; one that runs only in a session from its spec."""
        out = []
        for name in self.catalogue.names():
            spec = self.catalogue.spec(name)
            if name not in self.catalogue.registry.names() and spec is not None:
                out.append(AgentInfo(name, "LlmAgent", spec.config.description))
            else:
                out.append(info_of(self.catalogue.registry.get(name)))
        return out

    def _close_retired(self) -> None:
        retired, self._retired = self._retired, []
        for providers in retired:
            providers.close()

    def _start(
        self,
        request: StartAgentRun,
        owner: Owner,
        agent: Agent | None = None,
        *,
        on_end: Callable[[AgentRun | None], None] | None = None,
        journal: RunJournal | None = None,
    ) -> AgentRunStarted:
        """Start a run of `agent` (an object, from an embedded tree) or, without one, of
        the agent registered as `request.name`; `on_end`: a delegated run's; `journal`:
        a durable run's being resumed."""
        run = self._start_run(request, owner, agent, on_end=on_end, journal=journal)
        return AgentRunStarted(run.ref, run.stream, run.durable_id)

    def _start_run(
        self,
        request: StartAgentRun,
        owner: Owner,
        agent: Agent | None = None,
        *,
        on_end: Callable[[AgentRun | None], None] | None = None,
        journal: RunJournal | None = None,
    ) -> Run:
        """`_start`, answered with the run itself."""
        target: str | Agent = request.name if agent is None else agent
        if agent is None:
            agent = self.catalogue.agent(request.name)
        if request.input is not None and len(request.input) > MAX_AGENT_INPUT_CHARS:
            raise PhloemError(
                ErrorKind.BAD_MESSAGE, f"input must be at most {MAX_AGENT_INPUT_CHARS} chars"
            )
        self.runs.check_room()
        run_id = f"{agent.name}-{next(self._ids)}"
        executor = SupervisedExecutor(
            run_id,
            parent=self.runs_supervisor(),
            invocation_timeout_s=self.invocation_timeout_s,
            launcher=self.ctx.resources.launcher("isolated_agents"),
        )
        chain = self.ctx.interceptors.chain()
        if request.durable and journal is None:
            if self.journals is None or not isinstance(target, str) or on_end is not None:
                executor.close()
                raise PhloemError(
                    ErrorKind.BAD_MESSAGE, "only a started catalogue agent's run can be durable"
                )
            journal = self.journals.create(owner.uid, agent.name, msgspec.to_builtins(request))
        if journal is not None:  # innermost: what is replayed still passes the others
            chain = Interceptors((*chain.items, JournalInterceptor(journal)))
        state = _Run(run_id, agent, CancelToken(), executor, chain)
        state.on_end = on_end

        def launch(run: Run) -> ChildHandle:
            state.lifecycle = run
            work = functools.partial(drive, state, request)
            driver = FiberDriver if RUNS_ON_FIBERS and agent.fiber_safe else RunDriver
            spec = ChildSpec("driver", (driver, (run, work), {}), restart="temporary")
            return executor.supervisor.start_child(spec)

        try:
            self._configure(state, request, target)
            run = self.runs.start(
                owner,
                agent.name,
                launch,
                context=state,
                token=state.token,
                on_exit=self._exited,
                journal=journal,
            )
        except Exception:
            executor.close()
            raise
        return run

    def _exited(self, run: Run, reason: ExitReason) -> None:
        """A run's driver is gone (in this service's thread): its supervisor goes too."""
        state = run.context
        assert isinstance(state, _Run)
        state.executor.close()
        journal = run.journal
        if journal is not None and self.journals is not None:
            if journal.end is not None:  # kept for retention_s, max_retained_runs at most
                self.journals.note_ended(journal)
                self.journals.prune()
            if journal.id in self._resumed:
                self._resumed.discard(journal.id)
                self._resume_more()
        if state.on_end is not None:
            state.on_end(state.final)
        if not self.runs.live_count():
            self._close_retired()

    def _configure(self, run: _Run, request: StartAgentRun, target: str | Agent) -> None:
        """What the run adds to the tree's chain (`phloem.agents.preparation`): the
        request's tool policy, and for a catalogue agent each configured LLM agent's own
        policy and confirmation (asked on the run's stream), its instructions and its
        templates (an unknown `/name` fails the start)."""

        def send(item: ConfirmRequest) -> None:
            if run.on_end is not None:  # delegated: its owner is a tool call, not a person
                raise PhloemError(ErrorKind.CLOSED, "a delegated run has no one to confirm")
            assert run.lifecycle is not None
            run.lifecycle.confirm(item)

        prep = prepare(
            self.catalogue,
            target,
            policy=ToolPolicy.of(request.tools_allow, request.tools_deny),
            send=send,
        )
        if request.input is not None:
            prep.check(request.input)
        run.prep = prep
        confirm = prep.confirm
        if confirm is not None:
            run.token.on_cancel(lambda: confirm.close(f"run cancelled: {run.token.reason}"))


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


def _configured(config: Any, resources: Resources) -> tuple[ProviderRegistry, AgentCatalogue]:
    """The provider registry and the catalogue of the agents a config declares, their
    tools made by the tree's one tool assembly (`Resources.assembly`)."""
    from phloem.base.settings import load_component

    providers = ProviderRegistry(config.providers)
    catalogue = build_catalogue(
        config.agents,
        lambda path: load_component(path, what="agent"),
        providers.get,
        resources.assembly(config),
        describe=providers.describe,
    )
    return providers, catalogue


def _reload(ctx: ReloadContext) -> None:
    """The reloader of `[agents]` and `[providers]`: the running service rebuilds both."""
    handle = ctx.actor(SERVICE_PATH)
    if handle is not None:
        handle.ask(_Reconfigure(ctx.new), timeout=RELOAD_TIMEOUT_S)


register_service(SERVICE_NAME, agents_factory)
register_reloader(SERVICE_NAME, ("agents", "providers"), _reload)
