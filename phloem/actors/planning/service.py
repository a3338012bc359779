"""The `planning` service of a tree: the daemon-facing side of `PlanningRuntime`.

In the tree it is a small subtree (`rest_for_one`)::

    planning            supervisor
    ├── runs            simple_one_for_one supervisor; every run a temporary child
    └── service         PlanningService (actor path `planning/service`)

Requests (`protocol.PlanningRequest`) carry the calling client as owner:
`StartPlanning` → `PlanningStarted(ref)`, `AwaitPlanning` → the result as canonical JSON
text (decode it with `decode_result`), `CancelPlanning` → `PlanningCancelled`.
`OpenPlanningEvents` opens an owner-bound topic (`planning/events-…`) that a following
`StartPlanning(events=name)` fills with the run's events, so a client can subscribe
before the run starts and miss nothing. Awaits never block the service: they are
answered when the run ends or their timeout passes.

Adapters come from `[planning.planners]` / `[planning.executors]` of the config and are
loaded when the service starts: a bad entry stops the daemon from starting. With none
configured the service is not started (clients then get `planning_unavailable`).
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec

from phloem.actors.planning.adapters import AdapterRegistry
from phloem.actors.planning.callbacks import CallbackRunner
from phloem.actors.planning.events import PlanningEvent
from phloem.actors.planning.protocol import (
    AwaitPlanning,
    CancelPlanning,
    OpenPlanningEvents,
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
from phloem.actors.services import DEFER, Call, ServiceActor, ServiceContext, register_service
from phloem.actors.streams import Topic
from phloem.base.logs import get_logger
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.result import encode_result
from phloem.supervision import timers
from phloem.supervision.reasons import ExitReason
from phloem.supervision.spec import ChildSpec, Strategy, SupervisorChild, SupervisorSpec
from phloem.supervision.supervisor import SupervisorRef, sibling_of

log = get_logger("phloem.planning")

SERVICE_PATH = "planning/service"
# Topics opened with OpenPlanningEvents and not yet used by a StartPlanning.
MAX_PENDING_EVENT_TOPICS = 1024
# The run → topic forwarding window: the topic applies each client's own credit.
# Bound on the walk that finds the runs supervisor at the first request.
FORWARD_WINDOW = CreditWindow(65_536, 1024 * 1024 * 1024)


class PlanningService(ServiceActor):
    """Answers planning requests for the tree's clients."""

    request_type = PlanningRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        self.runtime: PlanningRuntime | None = None
        self._pending_topics: dict[str, Topic] = {}

    def on_start(self) -> None:
        cfg = getattr(self.ctx.config, "planning", None)
        planners = dict(getattr(cfg, "planners", {}) or {})
        executors = dict(getattr(cfg, "executors", {}) or {})
        self.adapters = AdapterRegistry.load(planners, executors)
        self.max_active_runs = int(getattr(cfg, "max_active_runs", DEFAULT_MAX_ACTIVE_RUNS))
        # Before any process child exists, so that the fork server starts with them.
        preload_callback_modules(self.adapters.modules())

    def _runtime(self) -> PlanningRuntime:
        if self.runtime is None:
            self.runtime = PlanningRuntime(
                self.adapters,
                refs=self.ctx.refs,
                runner=CallbackRunner(self.ctx.resources.launcher("planning_callbacks")),
                max_active_runs=self.max_active_runs,
                supervisor=self._runs_supervisor(),
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
            case OpenPlanningEvents():
                return self._open_events(call)
            case StartPlanning():
                return self._start(message, call)
            case AwaitPlanning():
                return self._await(message, call)
            case CancelPlanning(ref=ref, reason=reason):
                return PlanningCancelled(self._runtime().cancel(call.owner, ref, reason))
        raise PhloemError(ErrorKind.BAD_MESSAGE, "unknown planning request")

    # -- requests ------------------------------------------------------------------------

    def _open_events(self, call: Call) -> str:
        self._pending_topics = {n: t for n, t in self._pending_topics.items() if not t.closed}
        if len(self._pending_topics) >= MAX_PENDING_EVENT_TOPICS:
            raise PhloemError(
                ErrorKind.BACKPRESSURE,
                f"{MAX_PENDING_EVENT_TOPICS} planning event topics are unused",
            )
        name = f"planning/events-{secrets.token_hex(12)}"
        self._pending_topics[name] = self.open_topic(name, owner=call.owner)
        return name

    def _start(self, message: StartPlanning, call: Call) -> PlanningStarted:
        runtime = self._runtime()
        sink = None
        topic: Topic | None = None
        if message.events is not None:
            topic = self._pending_topics.get(message.events)
            if topic is None or topic.closed or topic.owner != call.owner:
                raise PhloemError(
                    ErrorKind.UNKNOWN_STREAM, "events must name a topic from open_events"
                )
            sink = _forward_to(topic)
        ref = runtime.start(
            call.owner,
            message.planner,
            message.executor,
            message.goal,
            message.context,
            message.options,
            sink,
        )
        if topic is not None:
            self._pending_topics.pop(topic.name, None)
        return PlanningStarted(str(ref))

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


def _forward_to(topic: Topic) -> Any:
    def deliver(event: PlanningEvent) -> None:
        topic.publish(msgspec.structs.asdict(event))

    def on_detach(reason: ExitReason) -> None:
        topic.close(reason)

    return (FORWARD_WINDOW, deliver, on_detach)


def planning_service(ctx: ServiceContext) -> ChildSpec | None:
    """The `planning` subtree: runs supervisor, then the service (rest_for_one).

    None (not started) when the config names no planner and no executor.
    """
    cfg = getattr(ctx.config, "planning", None)
    if not (getattr(cfg, "planners", None) or getattr(cfg, "executors", None)):
        return None
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
