"""Eval criteria: phloem's criteria file and ADK's `test_config.json`, read strictly.

phloem's file (`schema_version` 1)::

    {"schema_version": 1,
     "criteria": [{"id": "answer", "criterion": "exact_response", "threshold": 1.0,
                   "config": {"normalization": "casefold_trim"}}, ...]}

Criteria: `exact_response` (`normalization` exact | trim | casefold_trim),
`response_match_score` (ROUGE-1 F-measure with Porter stemming, as ADK computes it),
`tool_trajectory` (`match` exact | in_order | any_order | subset, `args` exact | subset |
ignored) and `llm_judge` (`rubric_id`, `rubric_version`, `rubric`, `provider`, `samples`,
`deadline_s`), which runs only when named; `custom` (`scorer`: a name the tree's
`[eval.scorers]`, or the embedding program, registered) calls trusted code.

ADK's `test_config.json` (its `EvalConfig`) is `{"criteria": {name: threshold |
{"threshold": x, ...}}, "custom_metrics"?, "user_simulator_config"?,
"live_model_config"?}`, snake_case or camelCase, nulls allowed;
`tool_trajectory_avg_score` (its `match_type` EXACT | IN_ORDER | ANY_ORDER, or 0 | 1 | 2
as ADK dumps the enum, maps to exact | in_order | subset: ADK's IN_ORDER and ANY_ORDER
allow extra calls; `ignore_args` true compares names only) and `response_match_score`
run; every other ADK criterion, the other top-level sections and a criterion's options
phloem does not implement are kept by name as `not_evaluated`. Without a file, ADK's
defaults apply: `tool_trajectory_avg_score` 1.0 and `response_match_score` 0.8. Files
are at most `MAX_CRITERIA_BYTES`.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import msgspec

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.files import read_bounded
from phloem.protocols.jsonvalue import JsonValueError, json_value, parse_json_text

CRITERIA_SCHEMA_VERSION = 1
MAX_CRITERIA_BYTES = 1024 * 1024
MAX_CRITERIA = 64
MAX_JUDGE_SAMPLES = 10
MAX_JUDGE_DEADLINE_S = 600.0

Normalization = Literal["exact", "trim", "casefold_trim"]
MatchPolicy = Literal["exact", "in_order", "any_order", "subset"]
ArgsPolicy = Literal["exact", "subset", "ignored"]

EXACT_RESPONSE = "exact_response"
RESPONSE_MATCH = "response_match_score"
TOOL_TRAJECTORY = "tool_trajectory"
LLM_JUDGE = "llm_judge"
CUSTOM = "custom"
KINDS = (EXACT_RESPONSE, RESPONSE_MATCH, TOOL_TRAJECTORY, LLM_JUDGE, CUSTOM)

ADK_TRAJECTORY = "tool_trajectory_avg_score"
ADK_MATCH_TYPES: dict[str, MatchPolicy] = {
    "EXACT": "exact",
    "IN_ORDER": "in_order",
    "ANY_ORDER": "subset",
}
ADK_DEFAULTS = {ADK_TRAJECTORY: 1.0, RESPONSE_MATCH: 0.8}


class Criterion(msgspec.Struct, frozen=True, omit_defaults=True):
    """One metric: `id` names it in reports, `criterion` says how it scores."""

    id: str
    criterion: str
    threshold: float = 1.0
    normalization: Normalization = "exact"
    match: MatchPolicy = "exact"
    args: ArgsPolicy = "exact"
    # llm_judge only
    rubric_id: str = ""
    rubric_version: str = ""
    rubric: str = ""
    provider: str = ""
    samples: int = 1
    deadline_s: float = 30.0
    # custom only: the registered scorer's name
    scorer: str = ""

    @property
    def kind(self) -> str:
        return "judge" if self.criterion == LLM_JUDGE else "metric"


class Criteria(msgspec.Struct, frozen=True):
    """The criteria to run, and the names of those read but not implemented."""

    criteria: list[Criterion]
    not_evaluated: list[str] = msgspec.field(default_factory=list)
    source: str = "default"  # default | phloem | adk


def invalid(message: str) -> PhloemError:
    return PhloemError(ErrorKind.EVAL_CRITERIA_INVALID, message)


def default_criteria() -> Criteria:
    """ADK's defaults when no criteria file is given."""
    return Criteria(
        [
            Criterion(ADK_TRAJECTORY, TOOL_TRAJECTORY, ADK_DEFAULTS[ADK_TRAJECTORY]),
            Criterion(RESPONSE_MATCH, RESPONSE_MATCH, ADK_DEFAULTS[RESPONSE_MATCH]),
        ]
    )


def read_criteria(path: str | os.PathLike[str]) -> Criteria:
    data = read_bounded(path, MAX_CRITERIA_BYTES, ErrorKind.EVAL_CRITERIA_INVALID)
    try:
        return parse_criteria(data)
    except PhloemError as exc:
        raise PhloemError(exc.kind, f"{os.fspath(path)}: {exc.message}") from None


def parse_criteria(data: bytes | str) -> Criteria:
    """phloem's criteria file or ADK's `test_config.json` (told apart by `criteria`
    being a list or an object)."""
    if len(data) > MAX_CRITERIA_BYTES:
        raise invalid(f"criteria file larger than {MAX_CRITERIA_BYTES} bytes")
    try:
        doc = json_value(parse_json_text(data, "criteria file"))
    except JsonValueError as exc:
        raise invalid(str(exc)) from None
    if not isinstance(doc, dict) or "criteria" not in doc:
        raise invalid("$ must be an object with 'criteria'")
    if isinstance(doc["criteria"], dict):
        return _adk(doc)
    return _phloem(doc)


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{path} must be a number")
    if not 0.0 <= value <= 1.0:
        raise invalid(f"{path} must be between 0 and 1")
    return float(value)


_ADK_CONFIG = {"criteria", "custom_metrics", "user_simulator_config", "live_model_config"}
_ADK_MATCH_NUMBERS = {0: "EXACT", 1: "IN_ORDER", 2: "ANY_ORDER"}  # the enum's dumped values


def _match_type(value: Any, path: str) -> MatchPolicy:
    """ADK's `match_type` as its validator reads it: a name in any case, with `-` or
    spaces for `_`, or the enum's number (what `model_dump_json` writes)."""
    name: Any = value
    if isinstance(value, int) and not isinstance(value, bool):
        name = _ADK_MATCH_NUMBERS.get(value)
    elif isinstance(value, str):
        name = value.strip().upper().replace("-", "_").replace(" ", "_")
    if name not in ADK_MATCH_TYPES:
        raise invalid(f"{path}.match_type must be one of EXACT, IN_ORDER, ANY_ORDER (or 0, 1, 2)")
    return ADK_MATCH_TYPES[name]


def _adk(doc: dict[str, Any]) -> Criteria:
    """ADK's `EvalConfig`: snake_case or camelCase keys, nulls where ADK writes them.
    What phloem does not run (other criteria, `user_simulator_config`,
    `custom_metrics`, `live_model_config`, options of a criterion it runs that it does
    not implement) is named in `not_evaluated`, never refused and never a pass."""
    config: dict[str, Any] = {}
    skipped: list[str] = []
    for key, value in doc.items():
        name = snake(key)
        if name in config:
            raise invalid(f"$: field {name!r} is given twice (snake_case and camelCase)")
        config[name] = value
        if name != "criteria" and value is not None and name not in skipped:
            skipped.append(name)  # what runs the eval differently than phloem can
    if not isinstance(config["criteria"], dict):
        raise invalid("$.criteria must be an object")
    criteria: list[Criterion] = []
    for name, value in config["criteria"].items():
        path = f"$.criteria.{name}"
        if name not in (ADK_TRAJECTORY, RESPONSE_MATCH):
            skipped.append(name)
            continue
        options: dict[str, Any] = {}
        if isinstance(value, dict):
            options = {snake(k): v for k, v in value.items()}
            if options.get("threshold") is None:
                raise invalid(f"{path}: missing field 'threshold'")
            threshold = _number(options.pop("threshold"), f"{path}.threshold")
        else:
            threshold = _number(value, path)
        if name == ADK_TRAJECTORY:
            match_type = options.pop("match_type", None)
            match = "exact" if match_type is None else _match_type(match_type, path)
            ignore = options.pop("ignore_args", None)
            if ignore is not None and not isinstance(ignore, bool):
                raise invalid(f"{path}.ignore_args must be true or false")
            args: ArgsPolicy = "ignored" if ignore else "exact"
            criteria.append(Criterion(name, TOOL_TRAJECTORY, threshold, match=match, args=args))
        else:
            criteria.append(Criterion(name, RESPONSE_MATCH, threshold))
        if options.get("include_intermediate_responses_in_final") is False:
            del options["include_intermediate_responses_in_final"]  # ADK's default: phloem's
        skipped += [f"{name}.{k}" for k, v in options.items() if v is not None]
    return Criteria(criteria, skipped, "adk")


def snake(key: str) -> str:
    """`matchType` → `match_type` (ADK's camelCase aliases); snake_case stays."""
    return "".join("_" + c.lower() if c.isupper() else c for c in key).lstrip("_")


_ENTRY_FIELDS = {"id", "criterion", "kind", "threshold", "config"}
_CONFIG_FIELDS = {
    EXACT_RESPONSE: {"normalization"},
    RESPONSE_MATCH: set(),
    TOOL_TRAJECTORY: {"match", "args"},
    LLM_JUDGE: {"rubric_id", "rubric_version", "rubric", "provider", "samples", "deadline_s"},
    CUSTOM: {"scorer"},
}


def _phloem(doc: dict[str, Any]) -> Criteria:
    unknown = sorted(set(doc) - {"schema_version", "criteria"})
    if unknown:
        raise invalid(f"$: unknown field {unknown[0]!r}")
    if doc.get("schema_version") != CRITERIA_SCHEMA_VERSION:
        raise invalid(f"$.schema_version must be {CRITERIA_SCHEMA_VERSION}")
    entries = doc["criteria"]
    if not isinstance(entries, list):
        raise invalid("$.criteria must be a list or an object")
    if not entries:
        raise invalid("$.criteria must not be empty")
    if len(entries) > MAX_CRITERIA:
        raise invalid(f"$.criteria has {len(entries)} entries; at most {MAX_CRITERIA} allowed")
    out: list[Criterion] = []
    for i, entry in enumerate(entries):
        path = f"$.criteria[{i}]"
        if not isinstance(entry, dict):
            raise invalid(f"{path} must be an object")
        unknown = sorted(set(entry) - _ENTRY_FIELDS)
        if unknown:
            raise invalid(f"{path}: unknown field {unknown[0]!r}")
        kind = entry.get("criterion")
        if kind not in _CONFIG_FIELDS:
            raise invalid(f"{path}.criterion must be one of {', '.join(KINDS)}")
        cid = entry.get("id", kind)
        if not isinstance(cid, str) or not cid or len(cid) > 128:
            raise invalid(f"{path}.id must be a string of 1 to 128 characters")
        config = entry.get("config", {})
        if not isinstance(config, dict):
            raise invalid(f"{path}.config must be an object")
        bad = sorted(set(config) - _CONFIG_FIELDS[kind])
        if bad:
            raise invalid(f"{path}.config: unknown field {bad[0]!r} for {kind}")
        threshold = _number(entry.get("threshold", 1.0), f"{path}.threshold")
        try:
            criterion = msgspec.convert(
                {"id": cid, "criterion": kind, "threshold": threshold, **config}, Criterion
            )
        except msgspec.ValidationError as exc:
            raise invalid(f"{path}.config: {exc}") from None
        if kind == LLM_JUDGE:
            _check_judge(criterion, f"{path}.config")
        if kind == CUSTOM and not criterion.scorer:
            raise invalid(f"{path}.config.scorer is required for custom")
        out.append(criterion)
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise invalid("$.criteria: two criteria share one id")
    return Criteria(out, [], "phloem")


def _check_judge(c: Criterion, path: str) -> None:
    for key in ("rubric_id", "rubric_version", "rubric", "provider"):
        if not getattr(c, key):
            raise invalid(f"{path}.{key} is required for llm_judge")
    if not 1 <= c.samples <= MAX_JUDGE_SAMPLES:
        raise invalid(f"{path}.samples must be between 1 and {MAX_JUDGE_SAMPLES}")
    if not 0 < c.deadline_s <= MAX_JUDGE_DEADLINE_S:
        raise invalid(f"{path}.deadline_s must be between 0 and {MAX_JUDGE_DEADLINE_S:g}")
