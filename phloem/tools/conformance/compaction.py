"""Runners for the compaction and token-estimate cases of a plasmid-v1 pack.

Kinds: `compaction/policy` (one pass of the policy over a request with a given state),
`compaction/calibration` (a pass, then calibration with the reported `promptTokens`),
`compaction/resume` (a pass through a session whose sidecar holds the input state, as
after a restart), `compaction/sidecar-failure` (a session whose sidecar cannot be read
nor written: warnings, and the work goes on) and `tokenestimate/estimate`.

Contents are compared as summaries: `{role, texts, calls: ["id:ID"], responses:
["id:ID:BODY"]}` (empty lists left out). phloem's warning codes are snake_case; the
pack spells them with dots (`compaction.sidecar.load`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from phloem.protocols.compaction import (
    CompactionSession,
    Policy,
    State,
    call_key,
    compact,
    response_key,
)
from phloem.protocols.tokens import canonical, estimate
from phloem.tools.conformance.cases import register_runner

JSON = Any
Warnings = list[dict[str, Any]] | None
FIXTURE_PATH = "fixture"
PLASMID_CODES = {
    "compaction_sidecar_load": "compaction.sidecar.load",
    "compaction_budget_exhausted": "compaction.budget.exhausted",
    "compaction_sidecar_save": "compaction.sidecar.save",
}


def _input(case_dir: Path) -> Any:
    return json.loads((case_dir / "input.json").read_text(encoding="utf-8"))


def policy_of(raw: dict[str, Any]) -> Policy:
    return Policy(
        context_tokens=int(raw.get("ContextTokens", 0)),
        trigger_fraction=float(raw.get("TriggerFraction", 0.85)),
        target_fraction=float(raw.get("TargetFraction", 0.60)),
        keep_recent_contents=int(raw.get("KeepRecentContents", 12)),
        minimum_elision_tokens=int(raw.get("MinimumElisionTokens", 200)),
        preserve_tool_names=tuple(raw.get("PreserveToolNames") or ()),
        calibration=bool(raw.get("Calibration", True)),
    )


def request_of(raw: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(contents, the rest of the wire request) from a pack's `request`."""
    contents = list(raw.get("Contents") or [])
    extra = {}
    if raw.get("Model"):
        extra["model"] = raw["Model"]
    if raw.get("Config"):
        extra["config"] = raw["Config"]
    return contents, extra


def summary(content: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": content.get("role", "")}
    parts = content.get("parts") or []
    texts = [p["text"] for p in parts if "text" in p]
    calls = [call_key(p["functionCall"]) for p in parts if "functionCall" in p]
    responses = [
        f"{response_key(r)}:{canonical(r.get('response')).decode()}"
        for r in (p["functionResponse"] for p in parts if "functionResponse" in p)
    ]
    for key, values in (("texts", texts), ("calls", calls), ("responses", responses)):
        if values:
            out[key] = values
    return out


def _state(value: Any) -> State:
    return State() if value is None else State.from_json(value)


def _policy(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    contents, extra = request_of(data["request"])
    state = _state(data.get("state"))
    result = compact(contents, policy_of(data["policy"]), state, extra)
    out: dict[str, Any] = {
        "contents": [summary(c) for c in result.contents],
        "state": state.to_json(),
    }
    if result.triggered:
        out["triggered"] = True
    if result.exhausted:
        out["exhausted"] = True
    return out, None


def _calibration(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    contents, extra = request_of(data["request"])
    session = CompactionSession(
        policy_of(data["policy"]), lambda: data.get("state"), lambda _: None, _no_warning
    )
    result = session.prepare(contents, extra)
    session.observe(int(data.get("promptTokens", 0)), result.contents, extra)
    return {
        "contents": [summary(c) for c in result.contents],
        "state": session.state.to_json(),
    }, None


def _resume(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    contents, extra = request_of(data["request"])
    saved: list[Any] = []
    session = CompactionSession(
        policy_of(data["policy"]), lambda: data.get("state"), saved.append, _no_warning
    )
    result = session.prepare(contents, extra)
    out: dict[str, Any] = {
        "contents": [summary(c) for c in result.contents],
        "state": session.state.to_json(),
    }
    if result.triggered:
        out["triggered"] = True
    return out, None


def _sidecar_failure(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    contents, extra = request_of(data["request"])
    warnings: list[dict[str, Any]] = []

    def load() -> Any:
        raise OSError("the sidecar cannot be read")

    def save(value: Any) -> None:
        raise OSError("the sidecar cannot be written")

    def warn(code: str, message: str) -> None:
        warnings.append(
            {
                "code": PLASMID_CODES.get(code, code),
                "line": 0,
                "path": FIXTURE_PATH,
                "source": "compaction",
            }
        )

    session = CompactionSession(policy_of(data["policy"]), load, save, warn)
    result = session.prepare(contents, extra)
    return {
        "contents": [summary(c) for c in result.contents],
        "state": session.state.to_json(),
        "warnings": warnings,
    }, None


def _estimate(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    raw = _input(case_dir)["request"]
    request = {key.lower(): value for key, value in raw.items()}
    import msgspec

    return {
        "canonical": canonical(request).decode(),
        "estimate": msgspec.to_builtins(estimate(request)),
    }, None


def _no_warning(code: str, message: str) -> None:
    return None


for _area, _kind, _runner in (
    ("compaction", "policy", _policy),
    ("compaction", "calibration", _calibration),
    ("compaction", "resume", _resume),
    ("compaction", "sidecar-failure", _sidecar_failure),
    ("tokenestimate", "estimate", _estimate),
):
    register_runner(_area, _kind, _runner)
