"""Sample, case and set statuses; thresholds; deterministic sample ids; baselines."""

from __future__ import annotations

import pytest

from phloem.actors.eval import accounting
from phloem.actors.eval.baseline import compare, with_baseline
from phloem.actors.eval.options import EvalOptions, check_options
from phloem.protocols.errors import ErrorValue, PhloemError
from phloem.protocols.evalcriteria import Criteria, Criterion
from phloem.protocols.evalreport import CaseResult, EvalReport, SampleResult
from phloem.protocols.evalset import EvalCase, EvalSet, Turn
from tests.helpers import raises_kind

CRITERIA = Criteria(
    [Criterion("exact", "exact_response"), Criterion("rouge", "response_match_score", 0.5)]
)
CASE = EvalCase("c", [Turn("t", "in", expected_response="x")])


def sample(index: int, status: str, **metrics: float | None) -> SampleResult:
    error = ErrorValue(kind="timeout", message="late") if status == "error" else None
    return SampleResult(f"s{index}", index, status, dict(metrics), error=error)  # type: ignore[arg-type]


def test_sample_ids_are_a_deterministic_hash_of_set_version_case_and_index() -> None:
    a = accounting.sample_id("set", "1", "case", 0)
    assert a == accounting.sample_id("set", "1", "case", 0)
    assert a.startswith("s-") and len(a) == 18
    others = {
        accounting.sample_id(*k)
        for k in [
            ("set", "2", "case", 0),
            ("set", "1", "case", 1),
            ("other", "1", "case", 0),
            ("set", "1", "c2", 0),
        ]
    }
    assert a not in others and len(others) == 4


def test_sample_status_needs_every_scored_criterion_at_its_threshold() -> None:
    assert accounting.sample_status({"exact": 1.0, "rouge": 0.5}, CRITERIA) == "passed"
    assert accounting.sample_status({"exact": 1.0, "rouge": 0.49}, CRITERIA) == "failed"
    assert accounting.sample_status({"exact": None, "rouge": 0.9}, CRITERIA) == "passed"
    assert accounting.sample_status({"exact": None, "rouge": None}, CRITERIA) == "not_evaluated"


def result(samples: list[SampleResult], **opts: object) -> CaseResult:
    options = EvalOptions(samples=len(samples), **opts)  # type: ignore[arg-type]
    return accounting.case_result(CASE, samples, CRITERIA, options)


def test_case_statuses() -> None:
    assert result([sample(0, "passed", exact=1.0, rouge=1.0)]).status == "passed"
    assert result([sample(0, "failed", exact=0.0, rouge=1.0)]).status == "failed"
    assert result([sample(0, "not_evaluated", exact=None, rouge=None)]).status == "not_evaluated"
    assert result([sample(0, "error"), sample(1, "error")]).status == "error"
    # one errored sample of two: too few successful samples by default -> partial
    mixed = [sample(0, "passed", exact=1.0, rouge=1.0), sample(1, "error")]
    got = result(mixed)
    assert (got.status, got.passed_samples, got.error_samples) == ("partial", 1, 1)
    # ... unless min_successful_samples allows it
    assert result(mixed, min_successful_samples=1).status == "passed"


def test_sample_pass_rate_threshold_and_metric_means() -> None:
    samples = [
        sample(0, "passed", exact=1.0, rouge=1.0),
        sample(1, "passed", exact=1.0, rouge=0.8),
        sample(2, "failed", exact=0.0, rouge=0.6),
        sample(3, "passed", exact=1.0, rouge=1.0),
    ]
    assert result(samples).status == "failed"  # 3/4 < 1.0
    got = result(samples, sample_pass_rate_threshold=0.75)
    assert got.status == "passed"
    assert got.metrics == {"exact": 0.75, "rouge": pytest.approx(0.85)}


def test_errors_never_count_as_passes_in_metrics() -> None:
    got = result(
        [sample(0, "passed", exact=1.0, rouge=1.0), sample(1, "error")], min_successful_samples=1
    )
    assert got.metrics == {"exact": 1.0, "rouge": 1.0}
    assert got.not_evaluated == []


def test_not_evaluated_names_criteria_without_expectations_and_unsupported_fields() -> None:
    case = EvalCase(
        "c",
        [Turn("t", "in", expected_intermediate_responses=["x"])],
        unsupported=["final_session_state"],
    )
    crit = Criteria(CRITERIA.criteria, ["safety_v1"])
    got = accounting.case_result(case, [sample(0, "not_evaluated")], crit, EvalOptions())
    assert got.status == "not_evaluated"
    assert got.not_evaluated == [
        "exact",
        "rouge",
        "safety_v1",
        "expected_intermediate_responses",
        "final_session_state",
    ]


def report(statuses: list[str], threshold: float = 1.0) -> EvalReport:
    cases = [
        CaseResult(f"c{i}", s, {"exact": 1.0 if s == "passed" else 0.0, "rouge": None}, [], [])  # type: ignore[arg-type]
        for i, s in enumerate(statuses)
    ]
    doc = EvalSet("set", "1", [EvalCase(c.id, [Turn("t", "x")]) for c in cases])
    return accounting.set_report(
        doc, "agent", cases, CRITERIA, EvalOptions(pass_rate_threshold=threshold), 5
    )


def test_set_pass_rate_leaves_not_evaluated_cases_out() -> None:
    got = report(["passed", "passed", "not_evaluated"])
    assert (got.status, got.pass_rate) == ("passed", 1.0)
    assert got.counts == {"passed": 2, "failed": 0, "partial": 0, "error": 0, "not_evaluated": 1}
    got = report(["passed", "failed", "error", "partial"], threshold=0.25)
    assert (got.status, got.pass_rate) == ("passed", 0.25)
    assert report(["passed", "failed"], threshold=0.75).status == "failed"
    nothing = report(["not_evaluated"])
    assert (nothing.status, nothing.pass_rate) == ("failed", 0.0)
    assert got.metrics == {"exact": 0.25, "rouge": None}


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("concurrency", 0, "concurrency must be between 1 and 256"),
        ("concurrency", 257, "concurrency must be between 1 and 256"),
        ("samples", 101, "samples must be between 1 and 100"),
        ("timeout_s", 0.0, "timeout_s must be between 0.01 and 86400"),
        ("case_timeout_s", 3601.0, "case_timeout_s must be between 0.01 and 3600"),
        ("pass_rate_threshold", 1.5, "pass_rate_threshold must be between 0 and 1"),
        ("min_successful_samples", 2, "min_successful_samples must be between 1 and 1"),
    ],
)
def test_option_edges(option: str, value: object, message: str) -> None:
    with pytest.raises(PhloemError) as info:
        check_options(EvalOptions(**{option: value}), 1)  # type: ignore[arg-type]
    assert (info.value.kind, info.value.message) == ("eval_options_invalid", message)


def test_option_upper_edges_are_accepted_and_total_samples_are_bounded() -> None:
    check_options(EvalOptions(concurrency=256, samples=100), 100)  # 10,000 samples
    assert raises_kind(check_options, EvalOptions(samples=100), 101) == "eval_options_invalid"


# --- baselines ---------------------------------------------------------------------------


def test_no_regression_against_itself() -> None:
    before = report(["passed", "failed"], threshold=0.5)
    got = compare(before, before)
    assert got.passed and got.regressions == []
    assert with_baseline(before, got).status == "passed"


def test_each_regression_kind() -> None:
    before = report(["passed", "passed", "failed"], threshold=0.5)
    now = report(["passed", "failed"], threshold=0.5)
    got = compare(now, before)
    kinds = [(r.kind, r.case_id, r.metric) for r in got.regressions]
    assert kinds == [
        ("pass_rate_drop", None, None),
        ("metric_drop", None, "exact"),
        ("case_not_passing", "c1", None),
    ]
    assert now.gates_passed and with_baseline(now, got).status == "failed"
    shorter = report(["passed", "passed"], threshold=0.5)
    longer = report(["passed", "passed", "passed"], threshold=0.5)
    missing = compare(shorter, longer)
    assert [(r.kind, r.case_id) for r in missing.regressions] == [("case_missing", "c2")]


def test_tolerances_allow_small_drops() -> None:
    before = report(["passed", "passed", "passed", "passed"], threshold=0.5)
    now = report(["passed", "passed", "passed", "failed"], threshold=0.5)
    strict = compare(now, before)
    assert {r.kind for r in strict.regressions} == {
        "pass_rate_drop",
        "metric_drop",
        "case_not_passing",
    }
    loose = compare(now, before, max_pass_rate_drop=0.25, metric_tolerances={"exact": 0.25})
    assert [r.kind for r in loose.regressions] == ["case_not_passing"]
    assert raises_kind(compare, now, before, max_pass_rate_drop=2.0) == "eval_options_invalid"
