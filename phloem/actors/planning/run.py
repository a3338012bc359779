"""One planning run: a temporary supervised actor driving planner and executor callbacks.

The run is event-driven so that it can always be cancelled: it starts a callback child
(`CallbackRunner`), returns to its inbox, and handles the callback's outcome when the
waiter thread posts it back. At most one callback is in flight. The state machine::

    plan() ──ok──> [execute(step) ──> review(observation)]* ──> terminal
       │                 │                    ├─ continue: next step, or finish after the last
       │                 │                    ├─ replan: next revision from its first step
       │                 │                    └─ complete / fail / error: finish
       └─ complete / error / failure: finish

Budgets: `max_steps` (executor calls across all revisions), `max_replans`, one absolute
deadline (`timeout_ms`) capping every callback's own `callback_timeout_ms`. A planner
callback that failed only because the fork server died with it (`callback_server_lost`)
is asked again once, as a restart would be, within the same deadline; an executor
callback is not (its step may have acted): its observation carries the failure, and the
planner decides. Every end is a `PlanningResult` handed to the run's `RunRecord`, except
when the owner went away: then the active worker is killed and the run stops without a
result.

The actor is the driver of a run of the one run lifecycle (`phloem.actors.runs`): its
events (`plan_accepted`, `step_started`, `observation`, `replan`, `terminal`) go to the
run's stream as they happen, each recorded with a content-free note (plan and step ids,
counts, statuses, error kinds), and its end carries the result's canonical JSON.

A durable run (`RunRecord.journal`, `phloem.actors.runs.journal`) numbers its callbacks
(1, 2, ...; the same numbers on every replay, the state machine being driven by their
outcomes only) and journals each: its marker before the callback starts, its outcome
before the run acts on it. A resumed run replays every recorded outcome instead of
calling back (the planner sees what it decided, the executor is not asked again); the
callback in flight at the crash is called again when it is a planner callback or the
step declares `idempotent`, else the run ends `failed` with `interrupted` (and the step's
id): a non-idempotent step is never run twice. The budgets carry over: `max_steps` and
`max_replans` count the replayed steps, the deadline is wall-clock from the original
start. A run that the daemon stops (shutdown) is suspended, not ended: its journal stays
unfinished for the next daemon.

Size: one module on purpose — it is the run's state machine above, every transition of
which checks the same budgets and ends in the same `finish`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pykka

from phloem.actors.planning import outcomes
from phloem.actors.planning.adapters import AdapterRef
from phloem.actors.planning.callbacks import CallbackOutcome, CallbackRunner, CallbackTask
from phloem.actors.planning.outcomes import (
    CompleteOutcome,
    ContinueOutcome,
    ErrorOutcome,
    FailOutcome,
    InvalidOutput,
    OkOutcome,
    ReplanOutcome,
    describe,
)
from phloem.actors.planning.worker import (
    Call,
    CallbackRequest,
    ExecuteCall,
    PlanCall,
    ReviewCall,
)
from phloem.actors.runs import Run, outcome_of
from phloem.actors.runs.journal import RunJournal
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind as K, ErrorValue, PhloemError
from phloem.protocols.jsonvalue import canonical_json
from phloem.protocols.plan import (
    Plan,
    PlanError,
    PlanningOptions,
    check_initial_plan,
    check_replacement_plan,
    from_mapping,
    is_idempotent,
    sanitize,
)
from phloem.protocols.result import (
    Observation,
    PlanningResult,
    ResultError,
    decode_result,
    encode_result,
)
from phloem.protocols.secrets import MAX_MESSAGE_CHARS, prune_secrets, redact_value
from phloem.supervision.actor import Actor, ActorHandle
from phloem.supervision.reasons import ExitReason

log = get_logger("phloem.planning")

# Messages a run's inbox can hold: callback outcomes, cancel, owner-down — a handful.
RUN_MAX_INBOX = 64
DEFAULT_CANCEL_REASON = "user_cancelled"


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything a run needs, validated before it starts."""

    planner: AdapterRef
    executor: AdapterRef
    goal: Any
    context: Any
    options: PlanningOptions


@dataclass(eq=False)
class RunRecord:
    """What the runtime and the run actor share: the result slot and the lifecycle's run
    (its stream, its record; the record is that run's `context`)."""

    spec: RunSpec
    run: Run | None = None  # set when the run starts
    result: PlanningResult | None = None
    abandoned: bool = False
    owner_gone: bool = False
    handle: ActorHandle | None = None
    done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    _callbacks: list[Callable[[RunRecord], None]] = field(default_factory=list)

    # Called once when the run ends, before `done` is set (the runtime frees its slot).
    on_end: Callable[[], None] | None = None
    # The starting request's trace context: the run's span is its child.
    trace: Any = None
    # A durable run's journal (what a resumed run replays).
    journal: RunJournal | None = None

    def finish(self, result: PlanningResult | None) -> bool:
        """Store the terminal result (None: abandoned); False if the run already ended."""
        with self._lock:
            if self.done.is_set():
                return False
            self.result = result
            self.abandoned = result is None
            if self.on_end is not None:
                self.on_end()
            self.done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("planning_done_callback_failed")
        return True

    def add_done_callback(self, callback: Callable[[RunRecord], None]) -> None:
        """Call `callback(record)` once the run ended (at once if it already has)."""
        with self._lock:
            if not self.done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def remove_done_callback(self, callback: Callable[[RunRecord], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


@dataclass(frozen=True, slots=True)
class _Begin:
    pass


@dataclass(frozen=True, slots=True)
class _Done:
    seq: int
    outcome: CallbackOutcome
    n: int = 0  # the callback's number in a durable run
    replayed: bool = False  # read from the journal, not called


@dataclass(frozen=True, slots=True)
class CancelRun:
    reason: Any = DEFAULT_CANCEL_REASON


@dataclass(frozen=True, slots=True)
class OwnerGone:
    detail: str | None = None


def clean_reason(reason: Any) -> Any:
    """A cancellation reason as public data: JSON, secrets pruned, strings redacted."""
    try:
        value = sanitize(reason, "$.reason")
    except PlanError:
        value = type(reason).__name__
    return redact_value(value, limit=MAX_MESSAGE_CHARS)


class PlanningRun(Actor):
    """The actor of one run. Started by the planning supervisor with `(record, runner)`."""

    max_inbox = RUN_MAX_INBOX

    def __init__(self, record: RunRecord, runner: CallbackRunner) -> None:
        super().__init__()
        self.record = record
        self.spec = record.spec
        self.options = record.spec.options
        self.runner = runner
        self.plan: Plan | None = None
        self.cursor = 0
        self.steps_executed = 0
        self.replans = 0
        self.observations: list[Observation] = []
        self.task: CallbackTask | None = None
        self.seq = 0
        self.ended = False
        self.capped = False
        self.started = time.monotonic()
        self.journal = record.journal
        self.calls = 0  # callbacks so far (a durable run's step numbers)
        if self.journal is not None:  # the deadline counts from the original start
            self.started -= max(0.0, time.time() - self.journal.started_at)
        self.deadline = self.started + self.options.timeout_ms / 1000
        self.on_callback: Callable[[CallbackOutcome], None] = self._on_plan
        self.retry: Callable[[], None] | None = None  # the planner callback, asked again
        self.span: Any = None  # `planning_run`, and the callback in flight's own span
        self.callback_span: Any = None

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        s = self.spec
        self.span = telemetry.start_span(
            "planning_run",
            {
                "gen_ai.operation.name": "invoke_workflow",
                "phloem.planning.planner": s.planner.name,
                "phloem.planning.executor": s.executor.name,
            },
            parent=self.record.trace,
        )
        # The first callback starts from the inbox, so that even a run that ends at once
        # (deadline already passed) ends as a result, never as a failed start.
        self.actor_ref.tell(_Begin())

    def _begin(self) -> None:
        journal = self.journal
        if journal is not None and journal.end is not None:
            self._ended_before(journal.end)
            return
        s = self.spec
        call = PlanCall(target=s.planner.target, goal=s.goal, context=s.context)
        self._callback(s.planner, call, self._on_plan)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Begin):
            if not self.ended:
                self._begin()
            return None
        if isinstance(message, _Done):
            if message.seq == self.seq and not self.ended:
                self.task = None
                self._end_callback_span(message.outcome.failure)
                retry, self.retry = self.retry, None
                if message.outcome.failure == "callback_server_lost" and retry is not None:
                    log.info("planning_callback_retried", failure=message.outcome.failure)
                    retry()
                    return None
                if self.journal is not None and not message.replayed:
                    try:
                        self.journal.step_completed(message.n, _outcome_data(message.outcome))
                    except PhloemError as exc:
                        self._fail(ResultError(exc.kind, exc.message))
                        return None
                self.on_callback(message.outcome)
            return None
        if isinstance(message, CancelRun):
            return self._cancel(message.reason)
        if isinstance(message, OwnerGone):
            self._abandon(message.detail)
            return None
        return None

    def on_failure(self, *exc_info: Any) -> None:
        """A bug in the run itself: kill the active worker and end with `run_crashed`."""
        exc = exc_info[1] if len(exc_info) > 1 else None
        reason = str(ExitReason.from_exception(exc)) if exc is not None else "unknown"
        self._kill_task()
        self._finish("failed", error=ResultError(K.RUN_CRASHED, reason), stop=False)

    def on_stop(self) -> None:
        if not self.ended:  # stopped by the supervisor (shutdown): a cancelled result
            self._kill_task()
            suspend = self.journal is not None  # the next daemon resumes it
            self._finish(
                "cancelled", error=ResultError(K.CANCELLED, "shutdown"), stop=False, suspend=suspend
            )

    def credit_in_use(self) -> int:
        run = self.record.run
        return run.credit_in_use() if run is not None else 0

    # -- callbacks -----------------------------------------------------------------------

    def _callback(
        self,
        adapter: AdapterRef,
        call: Call,
        then: Callable[[CallbackOutcome], None],
        retried: bool = False,
    ) -> None:
        """Start the callback; a planner's, unless `retried`, may be asked again once
        (`retry`, see the module docstring)."""
        self.retry = None
        if adapter.role == "planner" and not retried:
            self.retry = lambda: self._callback(adapter, call, then, retried=True)
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self._fail(ResultError(K.DEADLINE_EXCEEDED, limit=self.options.timeout_ms))
            return
        own = self.options.callback_timeout_ms / 1000
        self.capped = remaining < own
        self.seq += 1
        seq = self.seq
        self.on_callback = then
        actor_ref = self.actor_ref
        if not retried:  # a planner asked again keeps its number: the journal's step n
            self.calls += 1
        n = self.calls
        if self.journal is not None and not self._journal_call(n, seq, call):
            return
        tag = call.__struct_config__.tag
        self._end_callback_span("superseded")
        self.callback_span = telemetry.start_span(
            f"planning_callback {adapter.role}.{tag}",
            {"phloem.planning.role": adapter.role, "phloem.planning.adapter": adapter.name},
            parent=self.span,
        )

        def post(outcome: CallbackOutcome) -> None:
            try:
                actor_ref.tell(_Done(seq, outcome, n))
            except pykka.ActorDeadError:
                pass

        if adapter.agent is not None:  # an executor that runs an agent: no child of its own
            assert isinstance(call, ExecuteCall)
            owner = self.record.run.id if self.record.run is not None else "planning"
            self.task = self.runner.start_agent(
                adapter.agent, call.step, min(own, remaining), post, name=f"{owner} {tag}"
            )
            return
        call = msgspec.structs.replace(call, config=adapter.config)
        request = canonical_json(CallbackRequest(adapter.role, adapter.spec, call))
        self.task = self.runner.start(
            request,
            min(own, remaining),
            self.options.max_memory_bytes,
            post,
            name=f"{adapter.role}.{tag}",
            trace=self.callback_span,
        )

    def _journal_call(self, n: int, seq: int, call: Call) -> bool:
        """A durable run's callback `n`: replayed from the journal (False: nothing to
        start), refused when it is a non-idempotent step a crash cut short (False: the
        run ended `interrupted`), else marked as started (True: start it)."""
        journal = self.journal
        assert journal is not None
        if n in journal.completed:
            outcome = _outcome_from(journal.completed[n])
            self.actor_ref.tell(_Done(seq, outcome, n, replayed=True))
            return False
        step = call.step if isinstance(call, ExecuteCall) else None
        if n in journal.started and step is not None and not is_idempotent(step):
            plan = self.plan
            reason = {"step_id": step.id, "plan_id": plan.id if plan else None}
            log.warning("planning_step_interrupted", run=journal.id, step=step.id)
            self._fail(ResultError(K.INTERRUPTED, reason))
            return False
        info: dict[str, Any] = {"call": call.__struct_config__.tag}
        if step is not None:
            info |= {"step_id": step.id, "idempotent": is_idempotent(step)}
        try:
            journal.step_started(n, info)
        except PhloemError as exc:
            self._fail(ResultError(exc.kind, exc.message))
            return False
        return True

    def _ended_before(self, end: dict[str, Any]) -> None:
        """A durable run whose journal holds its end (reattached after its daemon kept
        it): end with the recorded result, calling nothing."""
        self.ended = True
        text = end.get("result")
        telemetry.end_span(self.span, None)
        try:
            res = decode_result(text) if isinstance(text, str) else None
        except Exception:
            res = None
        if res is None:
            kind = str(end.get("error") or K.RUN_JOURNAL_FULL)
            res = _failed_result(ResultError(kind, "the journal kept no result"))
            text = encode_result(res).decode()
        run = self.record.run
        if run is not None:
            why = None
            if res.error is not None:
                why = ErrorValue(kind=res.error.kind, message=f"planning run {res.status}")
            run.end(outcome_of(res.status), error=why, result=text)
        self.record.finish(res)
        self.exit(ExitReason.normal())

    def _end_callback_span(self, error: str | None) -> None:
        sp, self.callback_span = self.callback_span, None
        telemetry.end_span(sp, error)

    def _kill_task(self) -> None:
        self._end_callback_span("cancelled")
        task, self.task = self.task, None
        self.seq += 1  # any outcome still in flight is now stale
        if task is not None:
            task.cancel()

    def _callback_failure(self, outcome: CallbackOutcome, kind: str) -> ResultError | None:
        """The error for a failed callback, or None if it answered. Deadline wins."""
        if outcome.failure is None:
            return None
        if (outcome.failure == "callback_timeout" and self.capped) or (
            time.monotonic() >= self.deadline
        ):
            return ResultError(K.DEADLINE_EXCEEDED, limit=self.options.timeout_ms)
        return ResultError(kind, outcome.failure)

    # -- planner: initial plan -----------------------------------------------------------

    def _on_plan(self, outcome: CallbackOutcome) -> None:
        failure = self._callback_failure(outcome, K.PLANNER_CALLBACK_FAILED)
        if failure is not None:
            self._fail(failure)
            return
        answer = outcome.answer
        assert answer is not None
        match answer:
            case OkOutcome(value=value):
                try:
                    plan = from_mapping(value)
                    check_initial_plan(plan, self.spec.goal, self.options.max_plan_bytes)
                except PlanError as exc:
                    self._fail(ResultError(K.INVALID_INITIAL_PLAN, _plan_reason(exc)))
                    return
                self.plan = plan
                self._event("plan_accepted", {"plan": plan.to_builtins()}, _plan_note(plan))
                self._next_step()
            case CompleteOutcome(value=value):
                self._finish("completed", result=prune_secrets(value))
            case ErrorOutcome(reason=reason):
                self._fail(ResultError(K.PLANNER_FAILED, prune_secrets(reason)))
            case InvalidOutput(of="complete", message=message):
                self._fail(ResultError(K.INVALID_PLANNER_RESULT, message))
            case _:
                self._fail(ResultError(K.INVALID_PLANNER_OUTPUT, describe(answer)))

    # -- executor ------------------------------------------------------------------------

    def _next_step(self) -> None:
        plan = self.plan
        if plan is None or self.cursor >= len(plan.steps):
            self._fail(ResultError(K.EMPTY_PLAN_EXECUTION))
            return
        if self.steps_executed >= self.options.max_steps:
            self._fail(ResultError(K.MAX_STEPS_EXCEEDED, limit=self.options.max_steps))
            return
        if time.monotonic() >= self.deadline:
            self._fail(ResultError(K.DEADLINE_EXCEEDED, limit=self.options.timeout_ms))
            return
        step = plan.steps[self.cursor]
        self.steps_executed += 1
        started = {
            "plan_id": plan.id,
            "revision": plan.revision,
            "step_id": step.id,
            "attempt": self.steps_executed,
        }
        self._event("step_started", started, started)
        call = ExecuteCall(target=self.spec.executor.target, step=step, context=self.spec.context)
        self._callback(self.spec.executor, call, self._on_execute)

    def _on_execute(self, outcome: CallbackOutcome) -> None:
        plan = self.plan
        assert plan is not None
        step = plan.steps[self.cursor]
        failure = self._callback_failure(outcome, K.EXECUTOR_CALLBACK_FAILED)
        if failure is not None and failure.kind == K.DEADLINE_EXCEEDED:
            self._fail(failure)
            return
        output: Any = None
        error: ResultError | None = failure
        if failure is None:
            answer = outcome.answer
            assert answer is not None
            match answer:
                case OkOutcome(value=value):
                    output = prune_secrets(value)
                case ErrorOutcome(reason=reason):
                    error = ResultError(K.EXECUTOR_FAILED, prune_secrets(reason))
                case InvalidOutput(message=message):
                    error = ResultError(K.INVALID_EXECUTOR_OUTPUT, message)
                case _:
                    error = ResultError(K.INVALID_EXECUTOR_RESULT, describe(answer))
        obs = _observation(plan, step.id, self.steps_executed, output, error)
        self.observations.append(obs)
        observation = obs.to_builtins()
        note = {"step_id": step.id, "status": obs.status}
        self._event("observation", observation, {**note, "error": error.kind if error else None})
        call = ReviewCall(
            target=self.spec.planner.target,
            plan=plan.to_builtins(),
            step_id=step.id,
            observation=observation,
            context=self.spec.context,
        )
        self._callback(self.spec.planner, call, self._on_review)

    # -- planner: review -----------------------------------------------------------------

    def _on_review(self, outcome: CallbackOutcome) -> None:
        failure = self._callback_failure(outcome, K.PLANNER_CALLBACK_FAILED)
        if failure is not None:
            self._fail(failure)
            return
        plan = self.plan
        assert plan is not None
        answer = outcome.answer
        assert answer is not None
        match answer:
            case ContinueOutcome():
                if self.cursor + 1 < len(plan.steps):
                    self.cursor += 1
                    self._next_step()
                    return
                last = self.observations[-1]
                if last.status == "ok":
                    self._finish("completed", result=last.output)
                else:
                    assert isinstance(last.error, ResultError)
                    self._fail(ResultError(K.STEP_FAILED, last.error.to_builtins()))
            case ReplanOutcome(plan=data):
                self._replan(plan, data)
            case CompleteOutcome(value=value):
                self._finish("completed", result=prune_secrets(value))
            case FailOutcome(reason=reason) | ErrorOutcome(reason=reason):
                self._fail(ResultError(K.PLANNER_FAILED, prune_secrets(reason)))
            case InvalidOutput(of="replan", message=message):
                self._fail(ResultError(K.INVALID_REPLAN, message))
            case InvalidOutput(of="complete", message=message):
                self._fail(ResultError(K.INVALID_PLANNER_RESULT, message))
            case _:
                self._fail(ResultError(K.INVALID_PLANNER_DECISION, describe(answer)))

    def _replan(self, current: Plan, data: Any) -> None:
        if self.replans >= self.options.max_replans:
            self._fail(ResultError(K.MAX_REPLANS_EXCEEDED, limit=self.options.max_replans))
            return
        try:
            new = from_mapping(data)
            check_replacement_plan(current, new, self.options.max_plan_bytes)
        except PlanError as exc:
            self._fail(ResultError(K.INVALID_REPLAN, _plan_reason(exc)))
            return
        self.replans += 1
        self.plan = new
        self.cursor = 0
        self._event("replan", {"plan": new.to_builtins()}, _plan_note(new))
        self._next_step()

    # -- endings -------------------------------------------------------------------------

    def _cancel(self, reason: Any) -> bool:
        if self.ended:
            return False
        self._kill_task()
        self._finish("cancelled", error=ResultError(K.CANCELLED, clean_reason(reason)))
        return True

    def _abandon(self, detail: str | None) -> None:
        if self.ended:
            return
        self.ended = True
        self._kill_task()
        telemetry.end_span(self.span, "owner_down")
        run = self.record.run
        if run is not None:
            why = ErrorValue(kind=K.OWNER_DOWN, message=detail or "the owner went away")
            run.end("cancelled", error=why, wait=False)
        self.record.finish(None)
        log.info("planning_run_abandoned", reason="owner_down")
        self.exit(ExitReason.owner_down(detail))

    def _fail(self, error: ResultError) -> None:
        self._finish("failed", error=error)

    def _finish(
        self,
        status: str,
        result: Any = None,
        error: ResultError | None = None,
        stop: bool = True,
        suspend: bool = False,
    ) -> None:
        if self.ended:
            return
        self.ended = True
        elapsed = int((time.monotonic() - self.started) * 1000)
        res = PlanningResult(
            status=status,  # type: ignore[arg-type]
            plan=self.plan,
            steps_executed=self.steps_executed,
            replans=self.replans,
            duration_ms=elapsed,
            observations=tuple(self.observations),
            result=result,
            error=error,
            metadata=self.options.result_metadata,
        )
        try:
            encode_result(res)
        except Exception as exc:
            log.error("planning_result_invalid", error=type(exc).__name__)
            res = PlanningResult(
                status="failed",
                plan=None,
                steps_executed=self.steps_executed,
                replans=self.replans,
                duration_ms=elapsed,
                observations=(),
                result=None,
                error=ResultError(K.INTERNAL_RESULT_VALIDATION_FAILED),
                metadata={},
            )
        telemetry.end_span(
            self.span,
            None if res.error is None else str(res.error.kind),
            **{"phloem.planning.status": res.status, "phloem.planning.steps": self.steps_executed},
        )
        telemetry.count("phloem.runs", kind="planning", outcome=res.status)
        telemetry.record("phloem.run.duration", elapsed / 1000, kind="planning", outcome=res.status)
        terminal: dict[str, Any] = {"status": res.status}
        terminal["error"] = None if res.error is None else res.error.to_builtins()
        kind = None if res.error is None else res.error.kind
        self._event("terminal", terminal, {"status": res.status, "error": kind})
        run = self.record.run
        if run is not None:
            why = None
            if res.error is not None:
                why = ErrorValue(
                    kind=res.error.kind,
                    message=f"planning run {res.status}",
                    details=res.error.to_builtins(),
                )
            run.end(
                outcome_of(res.status),
                error=why,
                result=encode_result(res).decode(),
                suspend=suspend,
            )
        self.record.finish(res)
        if stop:
            self.exit(ExitReason.normal())

    def _event(self, kind: str, data: dict[str, Any], note: dict[str, Any]) -> None:
        """One event to the run's stream (`data`: secret-pruned JSON) and its note."""
        run = self.record.run
        if run is not None:
            run.emit(kind, data, note)


def _outcome_data(outcome: CallbackOutcome) -> dict[str, Any]:
    """A callback outcome as journal data."""
    answer = None if outcome.answer is None else msgspec.to_builtins(outcome.answer)
    return {"answer": answer, "failure": outcome.failure, "detail": outcome.detail}


def _outcome_from(data: Any) -> CallbackOutcome:
    """A journaled callback outcome (one that no longer decodes is a worker failure)."""
    try:
        answer = data.get("answer")
        return CallbackOutcome(
            answer=None if answer is None else msgspec.convert(answer, outcomes.Outcome),
            failure=data.get("failure"),
            detail=data.get("detail"),
        )
    except (AttributeError, msgspec.ValidationError):
        return CallbackOutcome(failure="callback_exception", detail="unreadable journal record")


def _failed_result(error: ResultError) -> PlanningResult:
    return PlanningResult(
        status="failed",
        plan=None,
        steps_executed=0,
        replans=0,
        duration_ms=0,
        observations=(),
        result=None,
        error=error,
        metadata={},
    )


def _plan_note(plan: Plan) -> dict[str, Any]:
    return {"plan_id": plan.id, "revision": plan.revision, "steps": len(plan.steps)}


def _observation(
    plan: Plan, step_id: str, attempt: int, output: Any, error: ResultError | None
) -> Observation:
    if error is None:
        return Observation(plan.id, plan.revision, step_id, attempt, "ok", output=output)
    return Observation(plan.id, plan.revision, step_id, attempt, "error", error=error)


def _plan_reason(exc: PlanError) -> dict[str, Any]:
    reason: dict[str, Any] = {"kind": exc.kind, "message": exc.message}
    if exc.details:
        reason["details"] = exc.details
    return reason


__all__ = [
    "DEFAULT_CANCEL_REASON",
    "CancelRun",
    "OwnerGone",
    "PlanningRun",
    "RunRecord",
    "RunSpec",
    "clean_reason",
]
