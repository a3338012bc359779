"""The planning runtime: validates requests, starts runs, answers await/cancel for owners.

`PlanningRuntime` owns the `planning` supervisor (simple_one_for_one, every run a
`temporary` `PlanningRun` child) and starts each run through the one run lifecycle
(`phloem.actors.runs`): an owner-bound ref (`plan_` + 32 hex digits), the run's event
stream (`planning/<ref>`, whose first events wait for the owner to subscribe) and its
entry in the tree's record of runs. Rules:

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

Durable runs (`durable = true` in the options, else `[planning] durable`; needs the
runtime's `journals`) are journaled (`phloem.actors.runs.journal`, the run's replay rules in
`run`): their start reply names a durable id; their owner going away detaches them
instead of ending them; `attach(owner, run_id)` gives an owner of the same uid a new ref
and stream (another uid: `not_planning_owner`); `resume_all()` — when the service
starts — resumes every unfinished journal, at most `resume_concurrency` at once (and
never beyond `max_active_runs`), the rest queued until one ends; an ended one's journal
is kept for `retention_s`, at most `max_retained` of them.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

import msgspec

from phloem.actors.planning.adapters import AdapterRegistry
from phloem.actors.planning.callbacks import CallbackRunner
from phloem.actors.planning.run import (
    DEFAULT_CANCEL_REASON,
    CancelRun,
    OwnerGone,
    PlanningRun,
    RunRecord,
    RunSpec,
)
from phloem.actors.runs import Run, RunLog, ServiceRuns
from phloem.actors.runs.journal import RunJournal, RunJournals, check_owner
from phloem.actors.streams import StreamHub
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
from phloem.protocols.result import PlanningResult, ResultError, encode_result
from phloem.protocols.runs import DurableRunInfo
from phloem.supervision import forkserver
from phloem.supervision.actor import ActorHandle
from phloem.supervision.credit import CreditReceiver
from phloem.supervision.handle import ChildHandle
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
        streams: StreamHub | None = None,
        log: RunLog | None = None,
        journals: RunJournals | None = None,
        durable: bool = False,
    ) -> None:
        """`refs`, `streams` and `log` are the tree's (its owners, its topics, its record
        of runs); without them the runtime keeps its own, and records nothing. `journals`
        is where durable runs are journaled (none: no run can be durable); `durable` the
        default of a run whose options do not say."""
        check_range("max_active_runs", max_active_runs, *MAX_ACTIVE_RUNS_RANGE)
        self.adapters = adapters
        preload_callback_modules(adapters.modules())
        self.refs = refs or OwnerRegistry()
        self.runner = runner or CallbackRunner()
        self.max_active_runs = max_active_runs
        self.runs = ServiceRuns(
            "planning",
            PLANNING_REF_KIND,
            refs=self.refs,
            streams=streams if streams is not None else StreamHub(),
            log=log,
            prefix="planning",
            max_live=max_active_runs,
            keep_refs=True,  # until the result is awaited
        )
        self.journals = journals
        self.durable_default = durable
        self._resume_lock = threading.Lock()
        self._resume_queue: deque[RunJournal] = deque()
        self._resuming: set[str] = set()  # durable ids of resumed runs still live
        # held while a journal's run is looked up and started: never two drivers on one
        self._resume_start = threading.RLock()
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
    ) -> Run:
        """Start a run for `owner`: its `ref`, and its event `stream` (the owner's to read;
        what comes before the owner subscribes waits for it); a durable one's
        `durable_id`."""
        spec = self.prepare(planner, executor, goal, context, options)
        journal = None
        if self._durable(spec.options):
            if self.journals is None:
                raise PhloemError(
                    ErrorKind.INVALID_PLANNING_OPTIONS, "this runtime keeps no run journals"
                )
            self.runs.check_room()
            request = {
                "planner": planner,
                "executor": executor,
                "goal": spec.goal,
                "context": spec.context,
                "options": msgspec.to_builtins(spec.options),
            }
            journal = self.journals.create(owner.uid, _run_name(spec), request)
        try:
            return self._launch(owner, spec, journal)
        except BaseException:
            if journal is not None and self.journals is not None:
                journal.close()
                self.journals.forget(journal.id)
            raise

    def _durable(self, options: PlanningOptions) -> bool:
        return self.durable_default if options.durable is None else options.durable

    def _launch(self, owner: Owner, spec: RunSpec, journal: RunJournal | None) -> Run:
        if not self.supervisor.is_alive():
            raise PhloemError(ErrorKind.PLANNING_UNAVAILABLE, "the planning runtime is stopped")
        record = RunRecord(spec, journal=journal)
        record.trace = telemetry.capture()

        def launch(run: Run) -> ChildHandle:
            record.run = run
            try:
                return self.supervisor.start_child((record, self.runner))
            except PhloemError as exc:
                raise PhloemError(
                    ErrorKind.PLANNING_UNAVAILABLE, f"run could not start: {exc}"
                ) from None

        def owner_down(run: Run, reason: ExitReason) -> None:
            if journal is not None:  # a durable run goes on, detached
                run.detach()
            else:
                self._owner_gone(record, reason)

        run = self.runs.start(
            owner,
            _run_name(spec),
            launch,
            context=record,
            on_exit=self._ended,
            on_owner_down=owner_down,
            journal=journal,
        )
        handle = run.handle
        assert isinstance(handle, ActorHandle)
        with record._lock:
            record.handle = handle
            gone = record.owner_gone
        if gone:
            self._tell(handle, OwnerGone("owner went away while the run started"))
        # the run's own cancel (its stream failed, its service stops) ends it cancelled
        run.token.on_cancel(lambda: self._tell(handle, CancelRun(run.token.reason)))
        return run

    # -- durable runs --------------------------------------------------------------------

    def resume_all(self, unfinished: list[RunJournal] | None = None) -> int:
        """Resume every unfinished durable run (`unfinished`: those a scan found before
        this runtime took any request; None: scan now), under `resume_concurrency`; how
        many are to be resumed. Ended journals past their retention go first."""
        if self.journals is None:
            return 0
        if unfinished is None:
            unfinished = self.journals.scan()[0]
        self.journals.prune()
        with self._resume_lock:
            self._resume_queue.extend(unfinished)
        log.info("planning_resume", runs=len(unfinished))
        self._resume_more()
        return len(unfinished)

    @property
    def resume_pending(self) -> int:
        """Unfinished durable runs waiting for their turn to resume."""
        with self._resume_lock:
            return len(self._resume_queue)

    def _resume_more(self) -> None:
        assert self.journals is not None
        limit = self.journals.limits.resume_concurrency
        while True:
            with self._resume_lock:
                if not self._resume_queue or len(self._resuming) >= limit:
                    return
                if self.runs.live_count() >= self.max_active_runs:
                    return
                journal = self._resume_queue.popleft()
                self._resuming.add(journal.id)
            self._resume(journal)

    def _resume(self, journal: RunJournal, *, ended: bool = False) -> Run | None:
        """Start the run of `journal` again, detached (owned by a placeholder of its uid),
        from the journal as it is on disk now (a queued copy may be stale: an attach may
        have resumed and ended it meanwhile); one that has ended only when `ended` (an
        attach, which replays its end)."""
        assert self.journals is not None
        with self._resume_start:
            live = self.runs.durable(journal.id)
            if live is not None:  # never two drivers on one journal
                return live
            try:
                journal = self.journals.open(journal.id)
            except PhloemError as exc:
                log.error("planning_resume_failed", run=journal.id, kind=exc.kind)
                with self._resume_lock:
                    self._resuming.discard(journal.id)
                return None
            if journal.end is not None and not ended:
                with self._resume_lock:
                    self._resuming.discard(journal.id)
                return None
            return self._resume_now(journal)

    def _resume_now(self, journal: RunJournal) -> Run | None:
        owner = Owner.client(f"durable {journal.id}", uid=journal.uid)
        data = journal.input if isinstance(journal.input, dict) else {}
        try:
            spec = self.prepare(
                data.get("planner"),
                data.get("executor"),
                data.get("goal"),
                data.get("context"),
                data.get("options"),
            )
            run = self._launch(owner, spec, journal)
        except PhloemError as exc:
            log.error("planning_resume_failed", run=journal.id, kind=exc.kind)
            with self._resume_lock:
                self._resuming.discard(journal.id)
            if exc.kind != ErrorKind.BACKPRESSURE and journal.end is None:
                failed = PlanningResult(
                    status="failed",
                    plan=None,
                    steps_executed=0,
                    replans=0,
                    duration_ms=0,
                    observations=(),
                    result=None,
                    error=ResultError(exc.kind, exc.message),
                    metadata={},
                )
                journal.finish("failed", encode_result(failed).decode())
                if self.journals is not None:
                    self.journals.note_ended(journal)
            return None
        return run

    def attach(self, owner: Owner, run_id: Any) -> tuple[Run, str]:
        """Bind the durable run `run_id` to `owner` (same uid only): the run and
        `owner`'s new ref to it — a live one, one still waiting to be resumed (resumed
        now), or an ended one still retained (its result replayed)."""
        if self.journals is None or not isinstance(run_id, str):
            raise PhloemError(ErrorKind.UNKNOWN_DURABLE_RUN, "no durable run of that id")
        with self._resume_start:
            run = self._attach_target(owner, run_id)
        assert run.journal is not None
        _check_uid(owner, run.journal)
        return run, self.runs.attach(run, owner)

    def _attach_target(self, owner: Owner, run_id: str) -> Run:
        assert self.journals is not None
        run = self.runs.durable(run_id)
        if run is None:
            with self._resume_lock:
                queued = next((j for j in self._resume_queue if j.id == run_id), None)
                if queued is not None:
                    self._resume_queue.remove(queued)
                    self._resuming.add(queued.id)
            journal = queued if queued is not None else self.journals.open(run_id)
            _check_uid(owner, journal)
            run = self.runs.durable(run_id) or self._resume(journal, ended=True)
            if run is None:
                raise PhloemError(ErrorKind.UNKNOWN_DURABLE_RUN, f"durable run {run_id} is gone")
        return run

    def durable_runs(self, owner: Owner) -> list[DurableRunInfo]:
        """The durable runs kept (journals on disk) of `owner`'s uid, oldest first."""
        return [] if self.journals is None else self.journals.infos(owner.uid, self.runs.durable)

    def _ended(self, run: Run, reason: ExitReason) -> None:
        """The run's actor exited: if it left no result (killed), record `run_crashed`;
        a durable one's journal is counted among the retained, and the next resumes."""
        record = run.context
        assert isinstance(record, RunRecord)
        journal = run.journal
        if journal is not None and self.journals is not None:
            if journal.end is not None:
                self.journals.note_ended(journal)
                self.journals.prune()
            if run.owner.label == f"durable {journal.id}":  # a resumed run's placeholder
                self.refs.discard(run.ref)
            with self._resume_lock:
                self._resuming.discard(journal.id)
            self._resume_more()
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

    @property
    def active_runs(self) -> int:
        return self.runs.live_count()

    # -- owner operations ----------------------------------------------------------------

    def run_of(self, owner: Owner, ref: Any) -> Run:
        """The run behind `ref` (its text, an `OwnedRef` or the `Run`), for its owner only
        (`invalid_planning_ref` / `not_planning_owner` otherwise)."""
        if isinstance(ref, Run | OwnedRef):
            ref = ref.ref if isinstance(ref, Run) else ref.text
        return self.runs.resolve(ref, owner)

    def record(self, owner: Owner, ref: Any) -> RunRecord:
        """The result slot of the run behind `ref`, for its owner only."""
        record = self.run_of(owner, ref).context
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
        run = record.run
        text = ref.ref if isinstance(ref, Run) else ref.text if isinstance(ref, OwnedRef) else ref
        try:
            if run is not None:
                self.runs.release(run, owner, text if isinstance(text, str) else None)
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
        window: CreditWindow | None = None,
        *,
        auto_ack: bool = True,
    ) -> CreditReceiver[bytes]:
        """Read the run's stream in-process (msgpack `PlanningStreamItem`s) under `window`
        credit: every event from the first when this is its first subscriber, else from
        now on."""
        run = self.run_of(owner, ref)
        topic = self.runs.streams.get(run.stream, owner)
        return topic.stream.receiver(window, auto_ack=auto_ack)

    def run(
        self,
        owner: Owner,
        planner: Any,
        executor: Any,
        goal: Any,
        context: Any = None,
        options: Mapping[str, Any] | PlanningOptions | None = None,
    ) -> PlanningResult:
        """Start a run and wait for its result."""
        opts = parse_options(options)
        run = self.start(owner, planner, executor, goal, context, opts)
        return self.await_result(owner, run, opts.timeout_ms / 1000 + RUN_WAIT_SLACK_S)

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


def _check_uid(owner: Owner, journal: RunJournal) -> None:
    check_owner(owner.uid, journal)


def _run_name(spec: RunSpec) -> str:
    return f"{spec.planner.name} / {spec.executor.name}"


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
