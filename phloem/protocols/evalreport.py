"""Eval reports: the result of `phloem eval run`, and its JSON, Markdown and JUnit forms.

The JSON form (`schema_version` 1) is also the saved-result format a later run compares
against (`--baseline`): `{schema_version, eval_set_id, status: passed | failed,
pass_rate, metrics: {name: score}, cases: [{id, status, metrics: {name: score | null},
not_evaluated: [names], samples: [{id, status, metrics, error?}]}], ...}`.
Case statuses: `passed`, `failed`, `partial` (some samples errored, too few succeeded),
`error` (none succeeded), `not_evaluated` (nothing to score). A failed or errored sample
carries a `diagnosis` (expected against actual per failing turn, the aligned trajectory
diff, the first error), which the Markdown report shows under `## Failures`, JUnit in
each `<failure>`'s message and body, and the CLI on the terminal as each case ends.
Every renderer returns the exact, newline-terminated bytes that go to stdout and to a
file alike.
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


StepStatus = Literal["match", "mismatch", "missing", "extra"]


class CallStep(msgspec.Struct, frozen=True, omit_defaults=True):
    """One row of an aligned trajectory diff: an expected call, the actual call it was
    paired with (as the match policy pairs them), or one alone; calls as
    `name({args as sorted JSON})`. `differs`: the argument names the args policy
    compares differently in a `mismatch`."""

    status: StepStatus
    expected: str | None = None
    actual: str | None = None
    differs: list[str] = msgspec.field(default_factory=list)


class TurnDiagnosis(msgspec.Struct, frozen=True, omit_defaults=True):
    """One turn below a threshold: what was expected and what the agent did.
    `scores`: each criterion's score for this turn alone; `trajectory`: the aligned diff
    (None when the turn expects no trajectory) under `policy` (`match, args`)."""

    turn_id: str
    input: str
    actual_response: str
    expected_response: str | None = None
    scores: dict[str, float] = msgspec.field(default_factory=dict)
    trajectory: list[CallStep] | None = None
    policy: str = ""
    omitted_steps: int = 0  # rows left out past the diagnosis budget


class Diagnosis(msgspec.Struct, frozen=True, omit_defaults=True):
    """Why a sample failed or errored: its turns below a threshold, the thresholds, and
    the first error (the sample's own, else the first error event of its runs)."""

    turns: list[TurnDiagnosis] = msgspec.field(default_factory=list)
    thresholds: dict[str, float] = msgspec.field(default_factory=dict)
    error: ErrorValue | None = None
    omitted_turns: int = 0  # failing turns left out past the diagnosis budget


class SampleResult(msgspec.Struct, frozen=True, omit_defaults=True):
    id: str
    index: int
    status: SampleStatus
    metrics: dict[str, float | None] = msgspec.field(default_factory=dict)
    error: ErrorValue | None = None
    duration_ms: int = 0
    judge: dict[str, Any] = msgspec.field(default_factory=dict)  # rubric metadata, rationale
    diagnosis: Diagnosis | None = None  # failed and error samples (see `Diagnosis`)


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


_MARKS = {"match": "=", "mismatch": "~", "missing": "-", "extra": "+"}


def diagnosed(case: CaseResult) -> SampleResult | None:
    """The sample whose diagnosis explains a case that did not pass: its first failed or
    errored sample that carries one."""
    if case.status in ("passed", "not_evaluated"):
        return None
    return next((s for s in case.samples if s.diagnosis is not None), None)


def _verdict(name: str, value: float, thresholds: dict[str, float]) -> str:
    threshold = thresholds.get(name)
    if threshold is None:
        return f"{name} {value:.3f}"
    return f"{name} {value:.3f} {'<' if value < threshold else '≥'} {threshold:g}"


def _quoted(text: str) -> str:
    return msgspec.json.encode(text).decode()


def diagnosis_lines(case: CaseResult) -> list[str]:
    """Why `case` did not pass, as plain text lines (the terminal's and JUnit's form):
    for its diagnosed sample the first error, then each failing turn's expected and
    actual response with its scores against the thresholds, and the trajectory diff
    (`=` matched, `~` paired but different, `-` expected only, `+` actual only)."""
    sample = diagnosed(case)
    if sample is None or sample.diagnosis is None:
        return []
    d = sample.diagnosis
    others = sum(1 for s in case.samples if s.status in ("failed", "error")) - 1
    head = f"sample {sample.index} ({sample.id}): {sample.status}"
    lines = [head + (f" (and {others} more not passing)" if others > 0 else "")]
    if d.error is not None:
        lines.append(f"  first error: {d.error.kind}: {d.error.message}")
    for t in d.turns:
        lines.append(f"  turn {t.turn_id}: input {_quoted(t.input)}")
        if t.expected_response is not None:
            lines.append(f"    expected response: {_quoted(t.expected_response)}")
        lines.append(f"    actual response:   {_quoted(t.actual_response)}")
        if t.scores:
            verdicts = (_verdict(k, v, d.thresholds) for k, v in t.scores.items())
            lines.append("    scores: " + ", ".join(verdicts))
        if t.trajectory is not None:
            lines.append(f"    trajectory ({t.policy}):" + ("" if t.trajectory else " no calls"))
            for step in t.trajectory:
                mark = _MARKS[step.status]
                if step.status == "mismatch":
                    why = f"  [args differ: {', '.join(step.differs)}]" if step.differs else ""
                    lines.append(f"      ~ expected {step.expected}")
                    lines.append(f"        actual   {step.actual}{why}")
                else:
                    lines.append(f"      {mark} {step.expected or step.actual}")
            if t.omitted_steps:
                lines.append(f"      ({t.omitted_steps} more rows left out)")
    if d.omitted_turns:
        lines.append(f"  ({d.omitted_turns} more failing turns left out)")
    return lines


def _code(text: str | None) -> str:
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{_cell(text)}{pad}{fence}"


def _markdown_failures(report: EvalReport) -> list[str]:
    lines: list[str] = []
    for case in report.cases:
        sample = diagnosed(case)
        if sample is None or sample.diagnosis is None:
            continue
        d = sample.diagnosis
        lines += ["", f"### `{_cell(case.id)}`: {case.status}", ""]
        lines.append(f"Sample {sample.index} (`{sample.id}`): {sample.status}.")
        if d.error is not None:
            lines.append(f"First error: `{d.error.kind}`: {_cell(d.error.message)}")
        for t in d.turns:
            lines += ["", f"**Turn `{_cell(t.turn_id)}`**: {_code(t.input)}", ""]
            lines += ["| | expected | actual |", "| --- | --- | --- |"]
            expected = "—" if t.expected_response is None else _code(t.expected_response)
            lines.append(f"| response | {expected} | {_code(t.actual_response) or '(empty)'} |")
            if t.scores:
                verdicts = (_verdict(k, v, d.thresholds) for k, v in t.scores.items())
                lines += ["", "Scores: " + ", ".join(_cell(v) for v in verdicts) + "."]
            if t.trajectory is not None:
                lines += ["", f"Trajectory ({t.policy}):", ""]
                lines += ["| | expected | actual | note |", "| --- | --- | --- | --- |"]
                for step in t.trajectory:
                    note = {"missing": "missing", "extra": "extra"}.get(step.status, "")
                    if step.differs:
                        note = "args differ: " + ", ".join(step.differs)
                    elif step.status == "mismatch":
                        note = "differs"
                    lines.append(
                        f"| {_MARKS[step.status]} | {_code(step.expected)} | "
                        f"{_code(step.actual)} | {note} |"
                    )
                if not t.trajectory:
                    lines.append("| | (none) | (none) | |")
                if t.omitted_steps:
                    lines += ["", f"({t.omitted_steps} more rows left out.)"]
        if d.omitted_turns:
            lines += ["", f"({d.omitted_turns} more failing turns left out.)"]
    return ["", "## Failures", *lines] if lines else []


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
    ]
    spread = report.samples > 1  # with repeated samples: how the scores spread
    lines.append(
        "| metric | score | threshold |" + (" spread (min .. max, sd) |" if spread else "")
    )
    lines.append("| --- | ---: | ---: |" + (" ---: |" if spread else ""))
    for name, value in report.metrics.items():
        threshold = report.thresholds.get(name)
        bar = "—" if threshold is None else f"{threshold:g}"
        row = f"| {_cell(name)} | {_score(value)} | {bar} |"
        if spread:
            found = report.spread.get(name)
            row += (
                " — |"
                if found is None
                else f" {found.min:.3f} .. {found.max:.3f}, sd {found.stdev:.3f} |"
            )
        lines.append(row)
    if report.not_evaluated:
        lines += ["", "Not evaluated: " + ", ".join(f"`{n}`" for n in report.not_evaluated)]
    names = "".join(f" {_cell(m)} |" for m in report.metrics)
    lines += ["", "## Cases", "", "| case | status |" + names]
    lines.append("| --- | --- |" + " ---: |" * len(report.metrics))
    for case in report.cases:
        scores = "".join(f" {_score(case.metrics.get(m))} |" for m in report.metrics)
        lines.append(f"| {_cell(case.id)} | {case.status} |{scores}")
    lines += _markdown_failures(report)
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
            message = f"failed: {scores}" + _summary(case)
            failure = ET.SubElement(node, "failure", {"message": message})
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


def _summary(case: CaseResult) -> str:
    """The first failing turn in one line, for a `<failure>`'s message: its expected and
    actual response and how its trajectory differs."""
    sample = diagnosed(case)
    if sample is None or sample.diagnosis is None or not sample.diagnosis.turns:
        return ""
    t = sample.diagnosis.turns[0]
    parts = [f"turn {t.turn_id}"]
    if t.expected_response is not None:
        parts.append(f"expected {_quoted(t.expected_response)}")
    parts.append(f"actual {_quoted(t.actual_response)}")
    if t.trajectory is not None:
        counts = {k: sum(1 for s in t.trajectory if s.status == k) for k in _MARKS}
        differ = ", ".join(f"{n} {k}" for k, n in counts.items() if n and k != "match")
        parts.append(f"trajectory {differ or 'matches'}")
    return " — " + "; ".join(parts)


def _detail(case: CaseResult) -> str:
    lines = []
    for s in case.samples:
        error = f" {s.error.kind}: {s.error.message}" if s.error is not None else ""
        scores = ", ".join(f"{k}={_score(v)}" for k, v in s.metrics.items())
        lines.append(f"sample {s.index} ({s.id}): {s.status} {scores}{error}")
    explained = diagnosis_lines(case)
    if explained:
        lines += ["", *explained]
    return "\n".join(lines)


ENCODERS = {"json": encode_json, "markdown": encode_markdown, "junit": encode_junit}
