"""The `planning` service of a tree: the daemon-facing side of `PlanningRuntime`.

In the tree it is a small subtree (`rest_for_one`)::

    planning            supervisor
    ├── runs            simple_one_for_one supervisor; every run a temporary child
    └── service         PlanningService (actor path `planning/service`)

Requests (`protocol.PlanningRequest`) carry the calling client as owner:
`StartPlanning` → `PlanningStarted(ref, stream)` at once, `AwaitPlanning` → the result as
canonical JSON text (decode it with `decode_result`), `CancelPlanning` →
`PlanningCancelled`. A run is a run of the one run lifecycle (`phloem.actors.runs`): its
stream (`planning/<ref>`, the caller's to read) carries its events as `RunEvent`s and
its result's JSON in the `RunEnd`, and what comes before the caller subscribes waits for
it, so nothing is missed. Awaits never block the service: they are answered when the
run ends or their timeout passes.

Durable runs (docs/durable-runs.md): `AttachPlanning(run_id)` → `PlanningStarted` for the
caller (same uid as the starter), `ListDurablePlanning` → the caller's uid's durable runs.
When the service starts, it resumes every unfinished durable run in its journals
(`[planning] journal_dir`) under admission control (`resume_concurrency`).

Adapters come from `[planning.planners]` / `[planning.executors]` of the config and are
loaded when the service starts (`[planning.agents]` names executors that run an agent of
the catalogue instead, through the tree's delegation): a bad entry stops the daemon from
starting. With none configured the service is not started (clients then get
`planning_unavailable`).
"""

from __future__ import annotations

from typing import Any

from phloem.actors.planning.adapters import AdapterRegistry
from phloem.actors.planning.callbacks import CallbackRunner
from phloem.actors.planning.protocol import (
    AttachPlanning,
    AwaitPlanning,
    CancelPlanning,
    ListDurablePlanning,
    PlanningCancelled,
    PlanningRequest,
    PlanningStarted,
    StartPlanning,
)
from phloem.actors.planning.run import RunRecord
from phloem.actors.planning.runtime import (
    DEFAULT_MAX_ACTIVE_RUNS,
    PlanningRuntime,
    check_timeout,
    preload_callback_modules,
    run_child_spec,
    runs_supervisor_spec,
)
from phloem.actors.runs.journal import RunJournal, planning_journals
from phloem.actors.services import DEFER, Call, ServiceActor, ServiceContext, register_service
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.result import encode_result
from phloem.supervision import timers
from phloem.supervision.spec import ChildSpec, Strategy, SupervisorChild, SupervisorSpec
from phloem.supervision.supervisor import SupervisorRef, sibling_of

log = get_logger("phloem.planning")

SERVICE_PATH = "planning/service"
RESUME_START_RETRY_S = 0.02
"""How soon the service looks again for its `runs` supervisor to resume durable runs."""
RESUME_START_TRIES = 500
"""How many times it looks (10 s in all) before it logs `planning_resume_failed`."""


class PlanningService(ServiceActor):
    """Answers planning requests for the tree's clients."""

    request_type = PlanningRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        self.runtime: PlanningRuntime | None = None

    def on_start(self) -> None:
        cfg = getattr(self.ctx.config, "planning", None)
        planners = dict(getattr(cfg, "planners", {}) or {})
        executors = dict(getattr(cfg, "executors", {}) or {})
        agents = dict(getattr(cfg, "agents", {}) or {})
        self.adapters = AdapterRegistry.load(planners, executors, agents)
        self.max_active_runs = int(getattr(cfg, "max_active_runs", DEFAULT_MAX_ACTIVE_RUNS))
        self.durable = bool(getattr(cfg, "durable", False))
        self.journals = planning_journals(cfg, "planning")
        # Before any process child exists, so that the fork server starts with them.
        preload_callback_modules(self.adapters.modules())
        if self.journals is not None:
            # scanned before any request is taken: what is unfinished now is a crashed
            # daemon's, never a run this service starts
            unfinished = self.journals.scan()[0]
            self.later(lambda: self._resume_on_start(unfinished))

    def _resume_on_start(self, unfinished: list[RunJournal], tries: int = 0) -> None:
        """Resume the unfinished durable runs once the `runs` supervisor beside this
        service is reachable (it is a moment after this service's own start)."""
        try:
            runtime = self._runtime()
        except PhloemError as exc:
            if exc.kind != ErrorKind.PLANNING_UNAVAILABLE or tries >= RESUME_START_TRIES:
                log.error("planning_resume_failed", kind=exc.kind)
                return
            timers.call_later(
                RESUME_START_RETRY_S,
                lambda: self.later(lambda: self._resume_on_start(unfinished, tries + 1)),
            )
            return
        runtime.resume_all(unfinished)

    def _runtime(self) -> PlanningRuntime:
        if self.runtime is None:
            self.runtime = PlanningRuntime(
                self.adapters,
                refs=self.ctx.refs,
                runner=CallbackRunner(
                    self.ctx.resources.launcher("planning_callbacks"),
                    delegate=lambda: self.ctx.resources.delegate,
                ),
                max_active_runs=self.max_active_runs,
                supervisor=self._runs_supervisor(),
                streams=self.ctx.streams,
                log=self.ctx.resources.runs,
                journals=self.journals,
                durable=self.durable,
            )
        return self.runtime

    def _runs_supervisor(self) -> SupervisorRef:
        """The `runs` supervisor next to this service under `planning`."""
        me = self._phloem_handle
        runs = sibling_of(me, "runs") if me is not None else None
        if not isinstance(runs, SupervisorRef):
            raise PhloemError(
                ErrorKind.PLANNING_UNAVAILABLE, "the planning runs supervisor is not running"
            )
        return runs

    def handle(self, message: Any, call: Call) -> Any:
        match message:
            case StartPlanning():
                return self._start(message, call)
            case AwaitPlanning():
                return self._await(message, call)
            case CancelPlanning(ref=ref, reason=reason):
                return PlanningCancelled(self._runtime().cancel(call.owner, ref, reason))
            case AttachPlanning(run_id=run_id):
                run, ref = self._runtime().attach(call.owner, run_id)
                return PlanningStarted(ref, run.stream, run.durable_id)
            case ListDurablePlanning():
                return self._runtime().durable_runs(call.owner)
        raise PhloemError(ErrorKind.BAD_MESSAGE, "unknown planning request")

    # -- requests ------------------------------------------------------------------------

    def _start(self, message: StartPlanning, call: Call) -> PlanningStarted:
        run = self._runtime().start(
            call.owner,
            message.planner,
            message.executor,
            message.goal,
            message.context,
            message.options,
        )
        return PlanningStarted(run.ref, run.stream, run.durable_id)

    def _await(self, message: AwaitPlanning, call: Call) -> Any:
        runtime = self._runtime()
        timeout = check_timeout(message.timeout_s)
        owner, ref = call.owner, message.ref
        record = runtime.record(owner, ref)
        if record.done.is_set():
            return encode_result(runtime.take_result(owner, ref, record)).decode()
        if timeout == 0:
            raise _await_timeout(timeout)
        timer: timers.Timer | None = None

        def done(rec: RunRecord) -> None:
            if timer is not None:
                timer.cancel()
            try:
                call.reply(encode_result(runtime.take_result(owner, ref, rec)).decode())
            except PhloemError as err:
                call.fail(err)

        def expired() -> None:
            record.remove_done_callback(done)
            call.fail(_await_timeout(timeout))

        record.add_done_callback(done)
        if timeout is not None and not call.done:
            try:
                timer = timers.call_later(timeout, expired)
            except PhloemError:  # no room for the timer: the await is refused, whole
                record.remove_done_callback(done)
                raise
        return DEFER

    def on_stop(self) -> None:
        super().on_stop()
        if self.runtime is not None:
            self.runtime.stop()


def _await_timeout(timeout: float | None) -> PhloemError:
    return PhloemError(
        ErrorKind.PLANNING_AWAIT_TIMEOUT, f"planning run still running after {timeout} s"
    )


def planning_service(ctx: ServiceContext) -> ChildSpec | None:
    """The `planning` subtree: runs supervisor, then the service (rest_for_one).

    None (not started) when the config names no planner and no executor.
    """
    cfg = getattr(ctx.config, "planning", None)
    if not (getattr(cfg, "planners", None) or getattr(cfg, "executors", None)):
        return None  # (an agent executor needs a planner too)
    runs = ChildSpec(
        "runs", SupervisorChild(runs_supervisor_spec(), [run_child_spec()]), restart="permanent"
    )
    service = ChildSpec("service", (PlanningService, (ctx,), {}), shutdown=15.0)
    return ChildSpec(
        ctx.name,
        SupervisorChild(SupervisorSpec(Strategy.REST_FOR_ONE), [runs, service]),
        restart="permanent",
    )


register_service("planning", planning_service)
