"""Running an eval set: every case x sample as a fresh agent run, bounded and cancellable.

Each sample gets a fresh session (seeded from the case's `session_input`) and its own
`SupervisedExecutor` under the eval's supervisor, and runs every turn of its case through
the agents runtime (`phloem.agents.runner.run_agent`, the same runner the agents
service drives) in that one session. At most `concurrency` samples run at once, each on a
worker thread of its own.

Bounds: a sample still running after `case_timeout_s` is cancelled, its supervisor (and
every actor and process child under it) is stopped, and it counts as an `error`
(`timeout`); a result that arrives later is ignored. After `timeout_s` the whole run stops
the same way and samples never started are `error` (`timeout`) too. Cancelling the eval
(`cancel`) stops every running sample's tree and ends the run with `cancelled`.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from phloem.actors.eval import accounting
from phloem.actors.eval.diagnosis import Budget, diagnose
from phloem.actors.eval.judge import judge
from phloem.actors.eval.options import EvalOptions
from phloem.actors.eval.scorers import Scorer, check_scorers, custom_score
from phloem.actors.eval.scoring import TurnOutput, score
from phloem.agents.agent import Agent
from phloem.agents.context import CancelToken
from phloem.agents.runner import AgentRun, run_agent
from phloem.agents.session import InMemorySessionService
from phloem.agents.supervised import SupervisedExecutor
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.models.interceptors import NO_INTERCEPTORS, Interceptors
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.evalcriteria import CUSTOM, LLM_JUDGE, Criteria
from phloem.protocols.evalreport import CaseResult, Diagnosis, EvalReport, SampleResult
from phloem.protocols.evalset import EvalCase, EvalSet, ToolCall
from phloem.protocols.model import Model
from phloem.supervision.owners import carry
from phloem.supervision.spec import Launcher
from phloem.supervision.supervisor import SupervisorRef

log = get_logger("phloem.eval")

STOP_GRACE_S = 10.0  # how long a stopped sample's supervisor gets to stop its children
_ids = itertools.count(1)


def turn_output(run: AgentRun) -> TurnOutput:
    """What one turn answered: its output (`AgentRun.output`: the outcome's result, else
    the last text an agent said), the texts said before the last, every tool call the
    agents made, in order, and the first error event."""
    calls: list[ToolCall] = []
    texts: list[str] = []
    error = next((e.error for e in run.events if e.error is not None), None)
    for event in run.events:
        if event.author == "user" or event.content is None or event.planner_status is not None:
            continue
        calls.extend(ToolCall(c.name, dict(c.args)) for c in event.content.function_calls)
        if event.text and not event.content.function_calls and not event.partial:
            texts.append(event.text)
    return TurnOutput(run.output, tuple(calls), tuple(texts[:-1]), error)


@dataclass
class _Job:
    case: int
    index: int
    token: CancelToken
    executor: SupervisedExecutor
    deadline: float
    started: float = field(default_factory=time.monotonic)


class EvalEngine:
    """Runs one eval set against one agent (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        evalset: EvalSet,
        criteria: Criteria,
        options: EvalOptions,
        *,
        parent: SupervisorRef | None = None,
        judges: Callable[[str], Model] | None = None,
        cancel: CancelToken | None = None,
        on_case: Callable[[CaseResult, int], None] | None = None,
        invocation_timeout_s: float | None = None,
        chain: Callable[[], Interceptors] = lambda: NO_INTERCEPTORS,
        launcher: Launcher | None = None,
        scorers: Mapping[str, Scorer] | None = None,
    ) -> None:
        # The custom scorers a `custom` criterion may name (phloem.actors.eval.scorers).
        self.scorers = dict(scorers or {})
        check_scorers(criteria, self.scorers)
        self.agent = agent
        # Where the samples' isolated process children run (`[cluster]` kind `eval_cases`).
        self.launcher = launcher
        # The chain of one sample's run, made anew for each (phloem.agents.preparation):
        # the tree's plugins and telemetry, the agent's tool policy and its instructions
        # apply to every case run as they do to any run of the agent.
        self.chain = chain
        self.evalset = evalset
        self.criteria = criteria
        self.options = options
        self.parent = parent
        self.judges = judges
        self.cancel = cancel or CancelToken()
        self.on_case = on_case
        self.invocation_timeout_s = invocation_timeout_s or options.case_timeout_s
        self.name = f"eval-{next(_ids)}"
        self.diagnoses = Budget()  # at most MAX_DIAGNOSED_SAMPLES diagnosed samples a run
        self.started = time.monotonic()

    # -- one sample ---------------------------------------------------------------------

    def run_sample(self, case: EvalCase, index: int, job: _Job) -> SampleResult:
        sid = accounting.sample_id(self.evalset.id, self.evalset.version, case.id, index)
        started = time.monotonic()

        outputs: list[TurnOutput] = []

        def done(status: Any, metrics: dict[str, float | None], **extra: Any) -> SampleResult:
            ms = int((time.monotonic() - started) * 1000)
            cause = extra.pop("cause", None) or extra.get("error")
            if status in ("failed", "error") and self.diagnoses.take():
                extra["diagnosis"] = diagnose(self.criteria, case.turns, outputs, cause)
            return SampleResult(sid, index, status, metrics, duration_ms=ms, **extra)

        if not case.turns:
            return done("not_evaluated", {})
        si = case.session_input
        sessions = InMemorySessionService()
        session = sessions.create_session(
            (si.app_name if si else "") or "phloem-eval",
            (si.user_id if si else "") or "eval",
            state=si.state if si else None,
            session_id=si.session_id if si else None,
        )
        interceptors = self.chain()
        for turn in case.turns:
            if job.token.cancelled:
                raise PhloemError(ErrorKind.CANCELLED, str(job.token.reason))
            run = run_agent(
                self.agent,
                input=turn.input,
                sessions=sessions,
                session=session,
                executor=job.executor,
                cancel=job.token,
                interceptors=interceptors,
            )
            if not run.ok:
                outcome = run.outcome
                why = outcome.error.kind if outcome.error is not None else outcome.status
                return done(
                    "error",
                    {},
                    error=ErrorValue(
                        kind=ErrorKind.EVAL_RUN_FAILED,
                        message=f"turn {turn.id}: {outcome.status} ({why}): {outcome.message}",
                    ),
                    cause=turn_output(run).error or outcome.error,  # what went wrong first
                )
            outputs.append(turn_output(run))
        metrics: dict[str, float | None] = {}
        judged: dict[str, Any] = {}
        for c in self.criteria.criteria:
            if c.criterion == CUSTOM:
                try:
                    metrics[c.id] = custom_score(c, self.scorers[c.scorer], case, outputs)
                except PhloemError as exc:
                    error = ErrorValue(kind=exc.kind, message=f"{c.id}: {exc.message}")
                    return done("error", metrics, error=error)
                continue
            if c.criterion != LLM_JUDGE:
                metrics[c.id] = score(c, case.turns, outputs)
                continue
            try:
                if self.judges is None:
                    raise PhloemError(ErrorKind.JUDGE_FAILED, "no judge providers here")
                metrics[c.id], judged[c.id] = judge(c, self.judges(c.provider), case.turns, outputs)
            except PhloemError as exc:
                kind = ErrorKind.JUDGE_FAILED
                message = exc.message if exc.kind == kind else f"{exc.kind}: {exc.message}"
                return done(
                    "error", metrics, error=ErrorValue(kind=kind, message=f"{c.id}: {message}")
                )
        return done(accounting.sample_status(metrics, self.criteria), metrics, judge=judged)

    # -- the run ------------------------------------------------------------------------

    def run(self) -> EvalReport:
        """Run every case x sample and return the report (`cancelled` if cancelled), in
        an `evaluate` span (a no-op while telemetry is off)."""
        with telemetry.span("evaluate") as sp:
            if sp is not None:
                sp.set_attribute("phloem.eval.set_id", telemetry.bounded(self.evalset.id))
                sp.set_attribute("phloem.eval.cases", len(self.evalset.cases))
                sp.set_attribute("phloem.eval.samples", self.options.samples)
            report = self._run()
            if sp is not None:
                sp.set_attribute("phloem.eval.status", report.status)
                sp.set_attribute("phloem.eval.pass_rate", report.pass_rate)
            return report

    def _run(self) -> EvalReport:
        opts, cases = self.options, self.evalset.cases
        t0 = self.started = time.monotonic()
        run_deadline = t0 + opts.timeout_s
        pending = deque((c, i) for c in range(len(cases)) for i in range(opts.samples))
        running: dict[tuple[int, int], _Job] = {}
        results: queue.Queue[tuple[tuple[int, int], SampleResult]] = queue.Queue()
        samples: list[dict[int, SampleResult]] = [{} for _ in cases]
        finished: list[CaseResult | None] = [None] * len(cases)
        self.cancel.on_cancel(lambda: results.put(((-1, -1), _WAKE)))

        def record(key: tuple[int, int], sample: SampleResult) -> None:
            samples[key[0]][key[1]] = sample
            if len(samples[key[0]]) == opts.samples:
                ordered = [samples[key[0]][i] for i in range(opts.samples)]
                result = accounting.case_result(cases[key[0]], ordered, self.criteria, opts)
                finished[key[0]] = result
                if self.on_case is not None:
                    self.on_case(result, sum(1 for f in finished if f is not None))

        def stop(key: tuple[int, int], kind: ErrorKind, message: str) -> None:
            job = running.pop(key)
            job.token.cancel(message)
            threading.Thread(target=job.executor.close, name="eval-stop", daemon=True).start()
            sid = accounting.sample_id(
                self.evalset.id, self.evalset.version, cases[key[0]].id, key[1]
            )
            ms = int((time.monotonic() - job.started) * 1000)
            error = ErrorValue(kind=kind, message=message)
            record(key, self._errored(sid, key[1], error, ms))

        try:
            while pending or running:
                if self.cancel.cancelled:
                    raise PhloemError(ErrorKind.CANCELLED, f"eval cancelled: {self.cancel.reason}")
                now = time.monotonic()
                while pending and len(running) < opts.concurrency and now < run_deadline:
                    self._launch(pending.popleft(), running, results)
                if now >= run_deadline:
                    for key in list(running):
                        stop(key, ErrorKind.TIMEOUT, f"run timeout_s ({opts.timeout_s:g}s) passed")
                    while pending:
                        key = pending.popleft()
                        sid = accounting.sample_id(
                            self.evalset.id, self.evalset.version, cases[key[0]].id, key[1]
                        )
                        error = ErrorValue(
                            kind=ErrorKind.TIMEOUT,
                            message=f"not started before timeout_s ({opts.timeout_s:g}s)",
                        )
                        record(key, self._errored(sid, key[1], error))
                    break
                wake = min([run_deadline, *(j.deadline for j in running.values())])
                try:
                    key, sample = results.get(timeout=max(0.0, wake - now))
                except queue.Empty:
                    pass
                else:
                    if key in running:
                        job = running.pop(key)
                        job.executor.close()
                        record(key, sample)
                now = time.monotonic()
                for key, job in list(running.items()):
                    if now >= job.deadline:
                        stop(
                            key,
                            ErrorKind.TIMEOUT,
                            f"case_timeout_s ({opts.case_timeout_s:g}s) passed",
                        )
        finally:
            for key, job in list(running.items()):
                job.token.cancel("eval stopped")
                job.executor.close()
                running.pop(key)
        ms = int((time.monotonic() - t0) * 1000)
        done = [f for f in finished if f is not None]
        return accounting.set_report(self.evalset, self.agent.name, done, self.criteria, opts, ms)

    def _errored(self, sid: str, index: int, error: ErrorValue, ms: int = 0) -> SampleResult:
        """A sample that ended in `error` outside its run (a timeout, a crash): its
        diagnosis is the error alone."""
        diagnosis = Diagnosis(error=error) if self.diagnoses.take() else None
        return SampleResult(
            sid, index, "error", {}, error=error, duration_ms=ms, diagnosis=diagnosis
        )

    def _launch(
        self,
        key: tuple[int, int],
        running: dict[tuple[int, int], _Job],
        results: queue.Queue[tuple[tuple[int, int], SampleResult]],
    ) -> None:
        case = self.evalset.cases[key[0]]
        token = CancelToken()
        executor = SupervisedExecutor(
            f"{self.name}-{key[0]}-{key[1]}",
            parent=self.parent,
            invocation_timeout_s=self.invocation_timeout_s,
            launcher=self.launcher,
        )
        job = _Job(key[0], key[1], token, executor, time.monotonic() + self.options.case_timeout_s)
        running[key] = job
        parent = telemetry.capture()  # the `evaluate` span: each sample's run joins it

        def work() -> None:
            try:
                with telemetry.use(parent):
                    sample = self.run_sample(case, key[1], job)
            except Exception as exc:
                sid = accounting.sample_id(self.evalset.id, self.evalset.version, case.id, key[1])
                kind = exc.kind if isinstance(exc, PhloemError) else ErrorKind.EVAL_RUN_FAILED
                message = exc.message if isinstance(exc, PhloemError) else repr(exc)
                sample = self._errored(sid, key[1], ErrorValue(kind=kind, message=message))
            results.put((key, sample))

        # carried: process children of the sample's run are listed under the eval's driver
        threading.Thread(
            target=carry(work), name=f"eval-sample-{case.id[:32]}", daemon=True
        ).start()


_WAKE = SampleResult("", -1, "error")
