"""From scores to statuses: samples, cases and the set, with their thresholds.

- A sample is `error` when its run failed (timeout, agent failure, judge error), else
  `not_evaluated` when no criterion had an expectation to score, else `passed` when every
  scored criterion reached its threshold, else `failed`.
- A case with n samples: `not_evaluated` when every sample was; `error` when none
  succeeded (passed or failed) and some errored; `partial` when fewer than
  `min_successful_samples` succeeded; otherwise `passed` when passed / successful ≥
  `sample_pass_rate_threshold`, else `failed`. Its metrics are the means over its
  successful samples (None: never scored), and `spread` gives, per metric, the number,
  min, max and standard deviation of those samples' scores; `not_evaluated` lists the
  criteria without an expectation in the case, the criteria read but not implemented,
  and unsupported fields.
- The set's metrics are the means of its cases' metrics; its `spread` is taken over
  every successful sample of every case.
- The set's pass rate is passed / evaluated cases (not_evaluated cases left out; none
  evaluated is a pass rate of 0); it passes at `pass_rate_threshold`.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence

from phloem.actors.eval.options import EvalOptions
from phloem.protocols.evalcriteria import Criteria
from phloem.protocols.evalreport import (
    CaseResult,
    EvalReport,
    SampleResult,
    SampleStatus,
    Spread,
)
from phloem.protocols.evalset import EvalCase, EvalSet


def sample_id(set_id: str, version: str, case_id: str, index: int) -> str:
    """A deterministic sample id: a hash of set id, version, case id and index."""
    key = "\x00".join((set_id, version, case_id, str(index))).encode()
    return "s-" + hashlib.sha256(key).hexdigest()[:16]


def sample_status(metrics: dict[str, float | None], criteria: Criteria) -> SampleStatus:
    scored = [(c, s) for c in criteria.criteria if (s := metrics.get(c.id)) is not None]
    if not scored:
        return "not_evaluated"
    return "passed" if all(s >= c.threshold for c, s in scored) else "failed"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def spread(values: Sequence[float]) -> Spread | None:
    """The spread of `values` (None for none)."""
    if not values:
        return None
    return Spread(len(values), min(values), max(values), statistics.pstdev(values))


def _spreads(samples: Sequence[SampleResult], criteria: Criteria) -> dict[str, Spread]:
    out: dict[str, Spread] = {}
    for c in criteria.criteria:
        found = spread([v for s in samples if (v := s.metrics.get(c.id)) is not None])
        if found is not None:
            out[c.id] = found
    return out


def case_result(
    case: EvalCase,
    samples: Sequence[SampleResult],
    criteria: Criteria,
    options: EvalOptions,
) -> CaseResult:
    ok = [s for s in samples if s.status in ("passed", "failed")]
    passed = sum(1 for s in ok if s.status == "passed")
    errors = sum(1 for s in samples if s.status == "error")
    metrics: dict[str, float | None] = {}
    for c in criteria.criteria:
        values = [v for s in ok if (v := s.metrics.get(c.id)) is not None]
        metrics[c.id] = _mean(values)
    not_evaluated = [c.id for c in criteria.criteria if metrics[c.id] is None and errors == 0]
    not_evaluated += [n for n in criteria.not_evaluated if n not in not_evaluated]
    if any(t.expected_intermediate_responses for t in case.turns):
        not_evaluated.append("expected_intermediate_responses")
    not_evaluated += [u for u in case.unsupported if u not in not_evaluated]
    if samples and all(s.status == "not_evaluated" for s in samples):
        status = "not_evaluated"
    elif not ok and errors:
        status = "error"
    elif len(ok) < options.min_successful:
        status = "partial"
    elif passed / len(ok) >= options.sample_pass_rate_threshold:
        status = "passed"
    else:
        status = "failed"
    return CaseResult(
        id=case.id,
        status=status,  # type: ignore[arg-type]
        metrics=metrics,
        not_evaluated=not_evaluated,
        samples=list(samples),
        passed_samples=passed,
        error_samples=errors,
        spread=_spreads(ok, criteria),
    )


def set_report(
    evalset: EvalSet,
    agent: str,
    cases: Sequence[CaseResult],
    criteria: Criteria,
    options: EvalOptions,
    duration_ms: int,
) -> EvalReport:
    counts = {k: 0 for k in ("passed", "failed", "partial", "error", "not_evaluated")}
    for case in cases:
        counts[case.status] += 1
    evaluated = len(cases) - counts["not_evaluated"]
    pass_rate = counts["passed"] / evaluated if evaluated else 0.0
    metrics: dict[str, float | None] = {}
    for c in criteria.criteria:
        metrics[c.id] = _mean([v for case in cases if (v := case.metrics.get(c.id)) is not None])
    passed = evaluated > 0 and pass_rate >= options.pass_rate_threshold
    names: list[str] = []
    for case in cases:
        names += [n for n in case.not_evaluated if n not in names]
    return EvalReport(
        eval_set_id=evalset.id,
        eval_set_version=evalset.version,
        format=evalset.format,
        agent=agent,
        status="passed" if passed else "failed",
        gates_passed=passed,
        pass_rate=pass_rate,
        metrics=metrics,
        thresholds={c.id: c.threshold for c in criteria.criteria}
        | {"pass_rate": options.pass_rate_threshold},
        counts=counts,
        not_evaluated=names,
        samples=options.samples,
        duration_ms=duration_ms,
        cases=list(cases),
        spread=_spreads(
            [s for case in cases for s in case.samples if s.status in ("passed", "failed")],
            criteria,
        ),
    )
