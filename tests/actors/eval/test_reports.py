"""The three report forms: JSON (the saved-result format, read back strictly), Markdown,
and JUnit XML parsed back with junitparser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from phloem.protocols.errors import ErrorValue
from phloem.protocols.evalreport import (
    CaseResult,
    EvalReport,
    SampleResult,
    decode_json,
    encode_json,
    encode_junit,
    encode_markdown,
)
from tests.helpers import raises_kind


def make_report() -> EvalReport:
    def case(cid: str, status: str, score: float | None, error: bool = False) -> CaseResult:
        err = ErrorValue(kind="timeout", message="case_timeout_s (30s) passed") if error else None
        sample = SampleResult(
            f"s-{cid}",
            0,
            "error" if error else status,
            {"exact": score},
            error=err,
            duration_ms=1500,
        )  # type: ignore[arg-type]
        return CaseResult(
            cid, status, {"exact": score}, [] if score is not None else ["exact"], [sample]
        )  # type: ignore[arg-type]

    return EvalReport(
        eval_set_id="helpdesk",
        eval_set_version="3",
        agent="helpdesk",
        status="failed",
        pass_rate=0.5,
        metrics={"exact": 0.5},
        thresholds={"exact": 1.0, "pass_rate": 1.0},
        counts={"passed": 1, "failed": 1, "partial": 0, "error": 1, "not_evaluated": 1},
        not_evaluated=["exact"],
        duration_ms=4200,
        cases=[
            case("ok", "passed", 1.0),
            case("wrong|pipe", "failed", 0.0),
            case("slow", "error", None, error=True),
            case("nothing", "not_evaluated", None),
        ],
    )


def test_json_report_has_the_documented_shape_and_reads_back() -> None:
    report = make_report()
    data = encode_json(report)
    assert data.endswith(b"}\n")
    doc = json.loads(data)
    assert {"schema_version", "eval_set_id", "status", "pass_rate", "metrics", "cases"} <= set(doc)
    assert doc["schema_version"] == 1 and doc["status"] == "failed"
    first = doc["cases"][0]
    assert {"id", "status", "metrics", "not_evaluated", "samples"} <= set(first)
    assert {"id", "status", "metrics"} <= set(first["samples"][0])
    assert doc["cases"][2]["samples"][0]["error"]["kind"] == "timeout"
    assert decode_json(data) == report


def test_a_baseline_that_is_not_a_report_is_refused() -> None:
    assert raises_kind(decode_json, b'{"hello": 1}') == "eval_baseline_invalid"
    doc = json.loads(encode_json(make_report()))
    doc["schema_version"] = 2
    assert raises_kind(decode_json, json.dumps(doc).encode()) == "eval_baseline_invalid"


def test_markdown_report() -> None:
    text = encode_markdown(make_report()).decode()
    assert text.startswith("# Evaluation report\n")
    assert "- Status: **FAILED**" in text
    assert "- Pass rate: 50.0% (1/4 cases passed)" in text
    assert "## Metrics" in text and "| exact | 0.500 | 1 |" in text
    assert "## Cases" in text and "| wrong\\|pipe | failed | 0.000 |" in text
    assert "| slow | error | — |" in text
    assert text.endswith("\n")


def test_junit_report_reads_back_with_junitparser(tmp_path: Path) -> None:
    path = tmp_path / "eval.xml"
    path.write_bytes(encode_junit(make_report()))
    xml = JUnitXml.fromfile(str(path))
    (suite,) = list(xml)
    assert suite.name == "helpdesk"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 1, 1)
    cases = {c.name: c for c in suite}
    assert list(cases) == ["ok", "wrong|pipe", "slow", "nothing"]
    assert cases["ok"].is_passed
    assert isinstance(cases["wrong|pipe"].result[0], Failure)
    error = cases["slow"].result[0]
    assert isinstance(error, Error) and "timeout" in error.message
    assert isinstance(cases["nothing"].result[0], Skipped)
    assert cases["slow"].time == pytest.approx(1.5)


def test_a_baseline_file_is_at_most_16_mib(tmp_path: Path) -> None:
    from phloem.actors.eval.baseline import read_baseline
    from phloem.protocols.evalreport import MAX_REPORT_BYTES

    path = tmp_path / "baseline.json"
    body = encode_json(make_report())
    path.write_bytes(body + b" " * (MAX_REPORT_BYTES - len(body)))
    assert read_baseline(path) == make_report()
    with path.open("ab") as f:
        f.write(b" ")
    assert raises_kind(read_baseline, path) == "eval_baseline_invalid"


def _failing_report() -> EvalReport:
    from phloem.protocols.evalreport import CallStep, Diagnosis, TurnDiagnosis

    diagnosis = Diagnosis(
        turns=[
            TurnDiagnosis(
                turn_id="t1",
                input="say `hi`",
                actual_response="",
                expected_response="a | b",
                scores={"exact": 0.0},
                trajectory=[CallStep("extra", actual='f({"x":1})')],
                policy="exact, args exact",
                omitted_steps=2,
            )
        ],
        thresholds={"exact": 1.0},
        error=ErrorValue(kind="tool_failed", message="f broke"),
        omitted_turns=1,
    )
    sample = SampleResult("s-1", 0, "failed", {"exact": 0.0}, diagnosis=diagnosis)
    second = SampleResult("s-2", 1, "failed", {"exact": 0.0})
    case = CaseResult("c", "failed", {"exact": 0.0}, [], [sample, second])
    return EvalReport(
        eval_set_id="s",
        status="failed",
        pass_rate=0.0,
        metrics={"exact": 0.0},
        cases=[case],
        thresholds={"exact": 1.0},
        counts={"failed": 1},
    )


def test_the_diagnosis_reads_back_and_renders_in_every_form(tmp_path: Path) -> None:
    report = _failing_report()
    assert decode_json(encode_json(report)) == report  # a saved report with diagnoses
    md = encode_markdown(report).decode()
    assert "## Failures" in md and "First error: `tool_failed`: f broke" in md
    assert "**Turn `t1`**: `` say `hi` ``" in md  # a backtick inside: a longer fence
    assert "| response | `a \\| b` | (empty) |" in md
    assert '| + |  | `f({"x":1})` | extra |' in md
    assert "(2 more rows left out.)" in md and "(1 more failing turns left out.)" in md
    path = tmp_path / "r.xml"
    path.write_bytes(encode_junit(report))
    [case] = list(next(iter(JUnitXml.fromfile(str(path)))))
    [failure] = case.result
    assert failure.message.endswith('— turn t1; expected "a | b"; actual ""; trajectory 1 extra')
    assert "sample 0 (s-1): failed (and 1 more not passing)" in failure.text
    assert '      + f({"x":1})' in failure.text and "(2 more rows left out)" in failure.text


def test_a_report_saved_before_diagnoses_still_reads_back() -> None:
    doc = json.loads(encode_json(make_report()))
    for case in doc["cases"]:
        for sample in case["samples"]:
            assert "diagnosis" not in sample or sample.pop("diagnosis") is None
    assert decode_json(json.dumps(doc).encode()).cases[1].id == "wrong|pipe"
