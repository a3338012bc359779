"""The planning runtime: validates requests, starts runs, answers await/cancel for owners.

`PlanningRuntime` owns the `planning` supervisor (simple_one_for_one, every run a
`temporary` `PlanningRun` child) and binds each run to its owner with an owner-bound ref
(`plan_` + 32 hex digits). Rules:

- configuration errors — unknown adapter, bad options, non-JSON goal/context — raise
  `PhloemError` before anything starts;
- every run that started ends with exactly one `PlanningResult` (completed, failed or
  cancelled), except when its owner goes away: then its active worker is killed and it
  stops without a result;
- `await_planning`/`cancel_planning` from another owner → `not_planning_owner`;
  a malformed ref → `invalid_planning_ref`; a well-formed ref this owner does not hold is
  answered like another owner's (`not_planning_owner`) so probing tells nothing, and never
  touches a live run;
- a successful await hands the result over and forgets the ref.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from phloem.actors.planning.adapters import AdapterRegistry
from phloem.actors.planning.callbacks import CallbackRunner
from phloem.actors.planning.events import (
    DEFAULT_EVENT_WINDOW_BYTES,
    DEFAULT_EVENT_WINDOW_MESSAGES,
    PlanningEvent,
    event_size,
)
from phloem.actors.planning.run import (
    DEFAULT_CANCEL_REASON,
    CancelRun,
    OwnerGone,
    PlanningRun,
    RunRecord,
    RunSpec,
)
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.protocols.limits import check_range
from phloem.protocols.plan import (
    PlanError,
    PlanningOptions,
    parse_options,
    sanitize,
)
from phloem.protocols.refs import OwnedRef, RefKind
from phloem.protocols.result import PlanningResult, ResultError
from phloem.supervision import forkserver
from phloem.supervision.actor import ActorHandle
from phloem.supervision.credit import CreditStream, Subscription
from phloem.supervision.reasons import ExitReason
from phloem.supervision.refs import Owner, OwnerRegistry
from phloem.supervision.spec import ChildSpec, Strategy, SupervisorSpec
from phloem.supervision.supervisor import Supervisor, SupervisorRef

log = get_logger("phloem.planning")

PLANNING_REF_KIND = RefKind(
    name="planning",
    prefix="plan_",
    invalid_error=ErrorKind.INVALID_PLANNING_REF,
    not_owner_error=ErrorKind.NOT_PLANNING_OWNER,
    too_many_error=ErrorKind.TOO_MANY_PLANNING_RUNS,
)
DEFAULT_MAX_ACTIVE_RUNS = 1024
MAX_ACTIVE_RUNS_RANGE = (1, 100_000)
# Canonical JSON size of a request's goal plus context.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
# How long cancel waits for the run to acknowledge (the worker is killed by then).
CANCEL_ACK_TIMEOUT_S = 1.0
# Longest single await; None in the API means "until the run ends".
MAX_AWAIT_TIMEOUT_S = 24 * 3600.0
# Slack over a run's own deadline that `run_planning` waits before giving up.
RUN_WAIT_SLACK_S = 30.0

EventSink = tuple[CreditWindow, Callable[[PlanningEvent], None], Callable[[ExitReason], None]]


def _request_error(message: str) -> PhloemError:
    return PhloemError(ErrorKind.INVALID_PLANNING_REQUEST, message)


class PlanningRuntime:
    """Thread-safe entry point for planning runs (used by the daemon and by `Tree`)."""

    def __init__(
        self,
        adapters: AdapterRegistry,
        *,
        refs: OwnerRegistry | None = None,
        runner: CallbackRunner | None = None,
        max_active_runs: int = DEFAULT_MAX_ACTIVE_RUNS,
        name: str = "planning",
        supervisor: SupervisorRef | None = None,
    ) -> None:
        check_range("max_active_runs", max_active_runs, *MAX_ACTIVE_RUNS_RANGE)
        self.adapters = adapters
        preload_callback_modules(adapters.modules())
        self.refs = refs or OwnerRegistry()
        self.refs.define_kind(PLANNING_REF_KIND)
        self.runner = runner or CallbackRunner()
        self.max_active_runs = max_active_runs
        self._lock = threading.Lock()
        self._active = 0
        self._ids = itertools.count(1)
        self._own_supervisor = supervisor is None
        self.supervisor: SupervisorRef = supervisor or Supervisor.start(
            runs_supervisor_spec(), [run_child_spec()], name=name
        )

    # -- starting ------------------------------------------------------------------------

    def prepare(
        self,
        planner: Any,
        executor: Any,
        goal: Any,
        context: Any = None,
        options: Mapping[str, Any] | PlanningOptions | None = None,
    ) -> RunSpec:
        """Validate a request into a `RunSpec` (raises before anything starts)."""
        opts = parse_options(options)
        planner_ref = self.adapters.resolve("planner", planner)
        executor_ref = self.adapters.resolve("executor", executor)
        try:
            clean_goal = sanitize(goal, "$.goal")
            clean_context = sanitize({} if context is None else context, "$.context")
        except PlanError as exc:
            raise _request_error(exc.message) from None
        size = json_size([clean_goal, clean_context])
        if size > MAX_REQUEST_BYTES:
            raise _request_error(f"goal and context must be <= {MAX_REQUEST_BYTES} bytes")
        return RunSpec(planner_ref, executor_ref, clean_goal, clean_context, opts)

    def start(
        self,
        owner: Owner,
        planner: Any,
        executor: Any,
        goal: Any,
        context: Any = None,
        options: Mapping[str, Any] | PlanningOptions | None = None,
        events: EventSink | None = None,
    ) -> OwnedRef:
        """Start a run for `owner`; its ref. `events` subscribes before the first event."""
        spec = self.prepare(planner, executor, goal, context, options)
        with self._lock:
            if not self.supervisor.is_alive():
                raise PhloemError(ErrorKind.PLANNING_UNAVAILABLE, "the planning runtime is stopped")
            if self._active >= self.max_active_runs:
                raise PhloemError(
                    ErrorKind.BACKPRESSURE,
                    f"{self._active} planning runs are active; max_active_runs is "
                    f"{self.max_active_runs}",
                )
            self._active += 1
        release = self._slot_releaser()
        try:
            stream: CreditStream[PlanningEvent] = CreditStream(
                f"planning-events-{next(self._ids)}", size_of=event_size
            )
            if events is not None:
                window, deliver, on_detach = events
                stream.subscribe(window, deliver, on_detach)
            record = RunRecord(spec, stream)
            record.on_end = release
            record.trace = telemetry.capture()
            ref = self.refs.create(
                owner, record, lambda reason: self._owner_gone(record, reason), "planning"
            )
        except BaseException:
            release()
            raise
        try:
            handle = self.supervisor.start_child((record, self.runner))
        except PhloemError as exc:
            if record.done.is_set():
                # It ran to its end before the supervisor saw it start (an instant
                # deadline): the start is reported as failed, but the result is there.
                release()
                return ref
            self.refs.discard(ref)
            release()
            raise PhloemError(
                ErrorKind.PLANNING_UNAVAILABLE, f"run could not start: {exc}"
            ) from None
        assert isinstance(handle, ActorHandle)
        handle.add_exit_callback(lambda reason: self._ended(record, reason, release))
        with record._lock:
            record.handle = handle
            gone = record.owner_gone
        if gone:
            self._tell(handle, OwnerGone("owner went away while the run started"))
        return ref

    def _release_slot(self) -> None:
        with self._lock:
            self._active -= 1

    @staticmethod
    def _ended(record: RunRecord, reason: ExitReason, release: Callable[[], None]) -> None:
        """The run's actor exited: if it left no result (killed), record `run_crashed`."""
        release()
        if not record.done.is_set():
            record.finish(
                PlanningResult(
                    status="failed",
                    plan=None,
                    steps_executed=0,
                    replans=0,
                    duration_ms=0,
                    observations=(),
                    result=None,
                    error=ResultError(ErrorKind.RUN_CRASHED, str(reason)),
                    metadata=record.spec.options.result_metadata,
                )
            )
            record.stream.close(reason)

    def _slot_releaser(self) -> Callable[[], None]:
        """A callable that frees one run slot, the first time it is called."""
        once = threading.Lock()

        def release() -> None:
            if once.acquire(blocking=False):
                self._release_slot()

        return release

    @property
    def active_runs(self) -> int:
        with self._lock:
            return self._active

    # -- owner operations ----------------------------------------------------------------

    def record(self, owner: Owner, ref: Any) -> RunRecord:
        """The run behind `ref`, for its owner only (`invalid_planning_ref` /
        `not_planning_owner` otherwise)."""
        if isinstance(ref, OwnedRef):
            ref = ref.text
        record = self.refs.resolve(ref, owner, "planning")
        assert isinstance(record, RunRecord)
        return record

    def await_result(self, owner: Owner, ref: Any, timeout: float | None = None) -> PlanningResult:
        """Wait for the run's result (`planning_await_timeout` if it is still running)."""
        wait = check_timeout(timeout)
        record = self.record(owner, ref)
        if not record.done.wait(wait):
            raise PhloemError(
                ErrorKind.PLANNING_AWAIT_TIMEOUT, f"planning run still running after {timeout} s"
            )
        return self.take_result(owner, ref, record)

    def take_result(self, owner: Owner, ref: Any, record: RunRecord) -> PlanningResult:
        """The ended run's result; its ref is forgotten (an await consumes it)."""
        result = record.result
        if result is None:  # abandoned: only possible when this owner went down
            raise PhloemError(
                ErrorKind.NOT_PLANNING_OWNER, "planning ref is not held by this owner"
            )
        try:
            self.refs.release(str(ref), owner, "planning")
        except PhloemError:
            pass  # a concurrent await of the same owner already released it
        return result

    def cancel(self, owner: Owner, ref: Any, reason: Any = DEFAULT_CANCEL_REASON) -> bool:
        """Cancel the run: kill its active worker; it ends `cancelled`. False if it had ended."""
        record = self.record(owner, ref)
        if record.done.is_set():
            return False
        handle = record.handle
        if handle is None:
            return False
        try:
            return bool(handle.ask(CancelRun(reason), timeout=CANCEL_ACK_TIMEOUT_S))
        except PhloemError as exc:
            if exc.kind == ErrorKind.NOPROC or record.done.is_set():
                return False
            raise PhloemError(
                ErrorKind.PLANNING_CANCEL_TIMEOUT, f"cancel not acknowledged: {exc}"
            ) from None

    def subscribe(
        self,
        owner: Owner,
        ref: Any,
        deliver: Callable[[PlanningEvent], None],
        on_detach: Callable[[ExitReason], None] | None = None,
        window: CreditWindow | None = None,
    ) -> Subscription:
        """Stream the run's future events to `deliver`, under `window` credit."""
        record = self.record(owner, ref)
        window = window or CreditWindow(DEFAULT_EVENT_WINDOW_MESSAGES, DEFAULT_EVENT_WINDOW_BYTES)
        return record.stream.subscribe(window, deliver, on_detach)

    def ack(self, owner: Owner, ref: Any, sub: Subscription, messages: int = 1) -> None:
        record = self.record(owner, ref)
        record.stream.ack(sub, messages)

    def run(
        self,
        owner: Owner,
        planner: Any,
        executor: Any,
        goal: Any,
        context: Any = None,
        options: Mapping[str, Any] | PlanningOptions | None = None,
        events: EventSink | None = None,
    ) -> PlanningResult:
        """Start a run and wait for its result."""
        opts = parse_options(options)
        ref = self.start(owner, planner, executor, goal, context, opts, events)
        return self.await_result(owner, ref, opts.timeout_ms / 1000 + RUN_WAIT_SLACK_S)

    def owner_down(self, owner: Owner, detail: str | None = None) -> int:
        """The owner went away: end its runs without results; how many refs it held."""
        return self.refs.owner_down(owner, detail)

    def _owner_gone(self, record: RunRecord, reason: ExitReason) -> None:
        with record._lock:
            record.owner_gone = True
            handle = record.handle
        if handle is not None:
            self._tell(handle, OwnerGone(reason.detail))

    @staticmethod
    def _tell(handle: ActorHandle, message: Any) -> None:
        try:
            handle.actor_ref.tell(message)
        except Exception:
            pass  # the run already ended

    # -- stopping ------------------------------------------------------------------------

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop every run (each ends `cancelled` with reason `shutdown`) and the supervisor
        (when the runtime started its own)."""
        if self._own_supervisor and self.supervisor.is_alive():
            self.supervisor.stop(timeout)


def runs_supervisor_spec() -> SupervisorSpec:
    """The runs supervisor: simple_one_for_one over temporary `PlanningRun` children."""
    return SupervisorSpec(strategy=Strategy.SIMPLE_ONE_FOR_ONE, intensity=0)


def run_child_spec() -> ChildSpec:
    return ChildSpec("planning-run", PlanningRun, restart="temporary", shutdown=10.0)


def preload_callback_modules(modules: list[str]) -> None:
    """Ask the fork server to import the callback worker and these adapter modules.

    Takes effect when the fork server (re)starts — normally the first process child of
    the daemon — and makes a callback child start as fast as a bare one. The modules come
    from the configuration only.
    """
    forkserver.add_preload(["phloem.actors.planning.worker", *modules])


def check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    return float(
        check_range(
            "timeout",
            timeout,
            0,
            MAX_AWAIT_TIMEOUT_S,
            kind=ErrorKind.INVALID_PLANNING_REQUEST,
            integer=False,
        )
    )
