"""Eval reports: the result of `phloem eval run`, and its JSON, Markdown and JUnit forms.

The JSON form (`schema_version` 1) is also the saved-result format a later run compares
against (`--baseline`): `{schema_version, eval_set_id, status: passed | failed,
pass_rate, metrics: {name: score}, cases: [{id, status, metrics: {name: score | null},
not_evaluated: [names], samples: [{id, status, metrics, error?}]}], ...}`.
Case statuses: `passed`, `failed`, `partial` (some samples errored, too few succeeded),
`error` (none succeeded), `not_evaluated` (nothing to score). Every renderer returns the
exact, newline-terminated bytes that go to stdout and to a file alike.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError

REPORT_SCHEMA_VERSION = 1
MAX_REPORT_BYTES = 16 * 1024 * 1024

CaseStatus = Literal["passed", "failed", "partial", "error", "not_evaluated"]
SampleStatus = Literal["passed", "failed", "error", "not_evaluated"]
RegressionKind = Literal["pass_rate_drop", "metric_drop", "case_not_passing", "case_missing"]


class SampleResult(msgspec.Struct, frozen=True, omit_defaults=True):
    id: str
    index: int
    status: SampleStatus
    metrics: dict[str, float | None] = msgspec.field(default_factory=dict)
    error: ErrorValue | None = None
    duration_ms: int = 0
    judge: dict[str, Any] = msgspec.field(default_factory=dict)  # rubric metadata, rationale


class Spread(msgspec.Struct, frozen=True):
    """How one metric's scores spread across the samples that scored it."""

    n: int
    min: float
    max: float
    stdev: float  # the population standard deviation (0.0 for one score)


class CaseResult(msgspec.Struct, frozen=True):
    id: str
    status: CaseStatus
    metrics: dict[str, float | None]
    not_evaluated: list[str]
    samples: list[SampleResult]
    passed_samples: int = 0
    error_samples: int = 0
    # per metric: the spread of its scores over this case's successful samples
    spread: dict[str, Spread] = msgspec.field(default_factory=dict)


class Regression(msgspec.Struct, frozen=True, omit_defaults=True):
    kind: RegressionKind
    message: str
    case_id: str | None = None
    metric: str | None = None
    baseline: float | str | None = None
    current: float | str | None = None


class BaselineComparison(msgspec.Struct, frozen=True):
    passed: bool
    regressions: list[Regression]
    max_pass_rate_drop: float = 0.0
    metric_tolerances: dict[str, float] = msgspec.field(default_factory=dict)


class EvalReport(msgspec.Struct, frozen=True):
    eval_set_id: str
    status: Literal["passed", "failed"]
    pass_rate: float
    metrics: dict[str, float | None]
    cases: list[CaseResult]
    schema_version: int = REPORT_SCHEMA_VERSION
    eval_set_version: str = ""
    format: str = ""
    agent: str = ""
    gates_passed: bool = True  # the absolute thresholds alone (before any baseline)
    thresholds: dict[str, float] = msgspec.field(default_factory=dict)
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    not_evaluated: list[str] = msgspec.field(default_factory=list)
    samples: int = 1
    duration_ms: int = 0
    baseline: BaselineComparison | None = None
    # per metric: the spread of its scores over every successful sample of every case
    spread: dict[str, Spread] = msgspec.field(default_factory=dict)


def report_invalid(message: str) -> PhloemError:
    return PhloemError(ErrorKind.EVAL_BASELINE_INVALID, message)


def encode_json(report: EvalReport) -> bytes:
    """The JSON report: indented, newline-terminated."""
    body = bytes(msgspec.json.format(msgspec.json.encode(report), indent=2))
    return body + b"\n"


def decode_json(data: bytes) -> EvalReport:
    """Read a saved JSON report strictly (a baseline)."""
    if len(data) > MAX_REPORT_BYTES:
        raise report_invalid(f"report larger than {MAX_REPORT_BYTES} bytes")
    try:
        report = msgspec.json.decode(data, type=EvalReport)
    except msgspec.DecodeError as exc:
        raise report_invalid(f"not an eval report: {exc}") from None
    if report.schema_version != REPORT_SCHEMA_VERSION:
        raise report_invalid(f"schema_version must be {REPORT_SCHEMA_VERSION}")
    return report


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def encode_markdown(report: EvalReport) -> bytes:
    """`# Evaluation report` with status, pass rate, metrics and one row per case."""
    lines = [
        "# Evaluation report",
        "",
        f"- Eval set: `{report.eval_set_id}`"
        + (f" (version {report.eval_set_version})" if report.eval_set_version else ""),
        f"- Agent: `{report.agent}`" if report.agent else "- Agent: —",
        f"- Status: **{report.status.upper()}**",
        f"- Pass rate: {report.pass_rate:.1%} "
        f"({report.counts.get('passed', 0)}/{len(report.cases)} cases passed)",
        f"- Samples per case: {report.samples}",
        "",
        "## Metrics",
        "",
        "| metric | score | threshold |",
        "| --- | ---: | ---: |",
    ]
    for name, value in report.metrics.items():
        threshold = report.thresholds.get(name)
        lines.append(
            f"| {_cell(name)} | {_score(value)} | "
            f"{'—' if threshold is None else f'{threshold:g}'} |"
        )
    if report.not_evaluated:
        lines += ["", "Not evaluated: " + ", ".join(f"`{n}`" for n in report.not_evaluated)]
    lines += ["", "## Cases", "", "| case | status | " + " | ".join(report.metrics) + " |"]
    lines.append("| --- | --- |" + " ---: |" * len(report.metrics))
    for case in report.cases:
        scores = " | ".join(_score(case.metrics.get(m)) for m in report.metrics)
        lines.append(f"| {_cell(case.id)} | {case.status} | {scores} |")
    if report.baseline is not None:
        lines += ["", "## Baseline", ""]
        if not report.baseline.regressions:
            lines.append("No regressions.")
        for reg in report.baseline.regressions:
            lines.append(f"- {reg.kind}: {_cell(reg.message)}")
    return ("\n".join(lines) + "\n").encode()


def encode_junit(report: EvalReport) -> bytes:
    """JUnit XML: one `testsuite` for the set, one `testcase` per case (`failure` for
    failed, `error` for error and partial, `skipped` for not_evaluated)."""
    import xml.etree.ElementTree as ET  # JUnit reports only: not loaded with the report type

    counts = report.counts
    suite = ET.Element(
        "testsuite",
        {
            "name": report.eval_set_id,
            "tests": str(len(report.cases)),
            "failures": str(counts.get("failed", 0)),
            "errors": str(counts.get("error", 0) + counts.get("partial", 0)),
            "skipped": str(counts.get("not_evaluated", 0)),
            "time": f"{report.duration_ms / 1000:.3f}",
        },
    )
    for case in report.cases:
        elapsed = sum(s.duration_ms for s in case.samples) / 1000
        node = ET.SubElement(
            suite,
            "testcase",
            {"classname": report.eval_set_id, "name": case.id, "time": f"{elapsed:.3f}"},
        )
        scores = ", ".join(f"{k}={_score(v)}" for k, v in case.metrics.items())
        if case.status == "failed":
            failure = ET.SubElement(node, "failure", {"message": f"failed: {scores}"})
            failure.text = _detail(case)
        elif case.status in ("error", "partial"):
            first = next((s.error for s in case.samples if s.error is not None), None)
            why = f"{first.kind}: {first.message}" if first is not None else case.status
            error = ET.SubElement(node, "error", {"message": f"{case.status}: {why}"})
            error.text = _detail(case)
        elif case.status == "not_evaluated":
            ET.SubElement(
                node, "skipped", {"message": "not evaluated: " + ", ".join(case.not_evaluated)}
            )
        out = ET.SubElement(node, "system-out")
        out.text = scores
    root = ET.Element("testsuites", {"name": "phloem eval"})
    root.append(suite)
    ET.indent(root)
    xml: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return xml + b"\n"


def _detail(case: CaseResult) -> str:
    lines = []
    for s in case.samples:
        error = f" {s.error.kind}: {s.error.message}" if s.error is not None else ""
        scores = ", ".join(f"{k}={_score(v)}" for k, v in s.metrics.items())
        lines.append(f"sample {s.index} ({s.id}): {s.status} {scores}{error}")
    return "\n".join(lines)


ENCODERS = {"json": encode_json, "markdown": encode_markdown, "junit": encode_junit}
