"""Baseline comparison: a run against a saved JSON report.

A regression is a pass-rate drop over `max_pass_rate_drop` (default 0.0), a set metric
that dropped by more than its tolerance (`metric_tolerances`, default 0.0 each), or a
case that passed in the baseline and no longer passes or is missing. With a baseline the
gate needs both: the current thresholds and no regression.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec

from phloem.protocols.errors import ErrorKind
from phloem.protocols.evalreport import (
    MAX_REPORT_BYTES,
    BaselineComparison,
    EvalReport,
    Regression,
    decode_json,
)
from phloem.protocols.files import read_bounded
from phloem.protocols.limits import check_range

EPSILON = 1e-9


def read_baseline(path: str | os.PathLike[str]) -> EvalReport:
    data = read_bounded(path, MAX_REPORT_BYTES, ErrorKind.EVAL_BASELINE_INVALID)
    return decode_json(data)


def check_tolerances(
    max_pass_rate_drop: float, metric_tolerances: Mapping[str, float] | None
) -> dict[str, float]:
    """The tolerances if each is in [0, 1], else `eval_options_invalid` naming it."""
    kind = ErrorKind.EVAL_OPTIONS_INVALID
    check_range("max_pass_rate_drop", max_pass_rate_drop, 0, 1, kind=kind, integer=False)
    tolerances = dict(metric_tolerances or {})
    for name, value in tolerances.items():
        check_range(f"metric_tolerances.{name}", value, 0, 1, kind=kind, integer=False)
    return tolerances


def compare(
    current: EvalReport,
    baseline: EvalReport,
    *,
    max_pass_rate_drop: float = 0.0,
    metric_tolerances: Mapping[str, float] | None = None,
) -> BaselineComparison:
    tolerances = check_tolerances(max_pass_rate_drop, metric_tolerances)
    regressions: list[Regression] = []
    drop = baseline.pass_rate - current.pass_rate
    if drop > max_pass_rate_drop + EPSILON:
        regressions.append(
            Regression(
                "pass_rate_drop",
                f"pass rate {baseline.pass_rate:.3f} -> {current.pass_rate:.3f} "
                f"(drop {drop:.3f} > {max_pass_rate_drop:g})",
                baseline=baseline.pass_rate,
                current=current.pass_rate,
            )
        )
    for name, before in baseline.metrics.items():
        now = current.metrics.get(name)
        if before is None:
            continue
        tolerance = tolerances.get(name, 0.0)
        if now is None or before - now > tolerance + EPSILON:
            regressions.append(
                Regression(
                    "metric_drop",
                    f"{name} {before:.3f} -> "
                    + ("not evaluated" if now is None else f"{now:.3f}")
                    + f" (tolerance {tolerance:g})",
                    metric=name,
                    baseline=before,
                    current=now,
                )
            )
    cases = {c.id: c for c in current.cases}
    for old in baseline.cases:
        if old.status != "passed":
            continue
        new = cases.get(old.id)
        if new is None:
            regressions.append(
                Regression("case_missing", f"case {old.id} is missing", case_id=old.id)
            )
        elif new.status != "passed":
            regressions.append(
                Regression(
                    "case_not_passing",
                    f"case {old.id} passed before, now {new.status}",
                    case_id=old.id,
                    baseline="passed",
                    current=new.status,
                )
            )
    return BaselineComparison(
        passed=not regressions,
        regressions=regressions,
        max_pass_rate_drop=max_pass_rate_drop,
        metric_tolerances=tolerances,
    )


def with_baseline(report: EvalReport, comparison: BaselineComparison) -> EvalReport:
    """`report` with the comparison attached; failed if it regressed."""
    status = "passed" if report.gates_passed and comparison.passed else "failed"
    return msgspec.structs.replace(report, baseline=comparison, status=status)
