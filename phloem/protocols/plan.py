"""Plans, planning outcomes, options and results: the planning runtime's public data.

A *plan* is an explicit, versioned document (schema version 1)::

    plan = {schema_version, id, revision, goal, steps, metadata}
    step = {id, description, action, metadata}

Actions are opaque JSON objects: nothing in a plan is ever evaluated or imported. `decode`
and `encode` validate the same shape and reject, each with a stable `kind`:

- unknown plan fields (`unknown_plan_fields`) or step fields (`unknown_plan_step_fields`,
  with the step index);
- one field given twice, under two spellings (`{"id": .., "ID": ..}`,
  `{"schema_version": .., "schemaVersion": ..}`) or twice in the JSON text
  (`duplicate_plan_field`); a single non-canonical spelling is accepted and canonicalised;
- a missing field (`missing_plan_field`), a repeated step id (`duplicate_plan_step_id`),
  a malformed step (`invalid_plan_step`) or plan field (`invalid_plan_field`);
- anything that is not JSON — functions, bytes, sets, NaN, non-string keys, invalid UTF-8,
  duplicate keys, nesting beyond `MAX_JSON_DEPTH` (`invalid_plan_json`);
- another schema version (`unsupported_plan_schema_version`).

Secret pruning (`prune_secrets`, from `phloem.protocols.secrets`) removes credential-shaped
keys from every document that crosses a public boundary: plans, goals, contexts,
observations, cancellation reasons and results. A key is normalised (lower-cased;
``_ - . : space`` removed) and removed when it equals one of `SECRET_KEYS_EXACT` or
contains one of `SECRET_KEY_PARTS`. A key containing ``token`` is removed too, unless it
names a *count* — its normalised form ends in ``tokens``, ``tokencount``, ``tokenscount``
or ``tokensdetails`` — and its value is a number, null or an object (pruned in turn). So
``max_tokens: 1024``, ``input_tokens: 7`` and ``promptTokenCount: 3`` survive, while
``access_token``, ``token``, ``id_token`` and ``refresh_tokens: ["…"]`` do not.

The terminal *result* (result schema version 1) has exactly the fields of
`PlanningResult`; `decode_result` rejects extra or missing keys, other versions and
inconsistent status/error combinations.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import msgspec

from phloem.protocols.errors import PhloemError
from phloem.protocols.secrets import is_secret_key, prune_secrets

__all__ = [
    "DEFAULT_OPTIONS",
    "MAX_JSON_DEPTH",
    "MAX_PLAN_DOCUMENT_BYTES",
    "RESULT_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "AwaitPlanning",
    "CancelPlanning",
    "Complete",
    "Continue",
    "Error",
    "ExecutorOutcome",
    "Fail",
    "Observation",
    "Ok",
    "OpenPlanningEvents",
    "Plan",
    "PlanError",
    "PlannerDecision",
    "PlannerOutcome",
    "PlanningCancelled",
    "PlanningErrorKind",
    "PlanningOptions",
    "PlanningRequest",
    "PlanningResult",
    "PlanningStarted",
    "Replan",
    "ResultError",
    "StartPlanning",
    "Step",
    "canonical_json",
    "check_initial_plan",
    "check_replacement_plan",
    "decode",
    "decode_result",
    "encode",
    "encode_result",
    "from_mapping",
    "is_secret_key",
    "json_value",
    "parse_options",
    "prune_secrets",
    "sanitize",
]

SCHEMA_VERSION = 1
RESULT_SCHEMA_VERSION = 1

# Deepest nesting accepted in any JSON value of a plan, context or result.
MAX_JSON_DEPTH = 64
# Largest plan or result document `decode`/`decode_result` will parse at all
# (the per-run `max_plan_bytes` check comes after; its hard maximum is the same).
MAX_PLAN_DOCUMENT_BYTES = 16 * 1024 * 1024
MAX_RESULT_DOCUMENT_BYTES = 64 * 1024 * 1024


class PlanningErrorKind(enum.StrEnum):
    """Every stable error kind of the planning runtime."""

    # plan codec
    UNKNOWN_PLAN_FIELDS = "unknown_plan_fields"
    UNKNOWN_PLAN_STEP_FIELDS = "unknown_plan_step_fields"
    DUPLICATE_PLAN_FIELD = "duplicate_plan_field"
    MISSING_PLAN_FIELD = "missing_plan_field"
    DUPLICATE_PLAN_STEP_ID = "duplicate_plan_step_id"
    INVALID_PLAN_STEP = "invalid_plan_step"
    INVALID_PLAN_FIELD = "invalid_plan_field"
    INVALID_PLAN_JSON = "invalid_plan_json"
    UNSUPPORTED_PLAN_SCHEMA_VERSION = "unsupported_plan_schema_version"
    INVALID_PLAN_IDENTITY = "invalid_plan_identity"
    PLAN_SIZE_LIMIT_EXCEEDED = "plan_size_limit_exceeded"
    INVALID_PLANNING_RESULT = "invalid_planning_result"
    # configuration (raised before a run starts)
    INVALID_PLANNING_OPTIONS = "invalid_planning_options"
    INVALID_PLANNING_ADAPTER = "invalid_planning_adapter"
    INVALID_PLANNING_REQUEST = "invalid_planning_request"
    # refs and waiting
    NOT_PLANNING_OWNER = "not_planning_owner"
    INVALID_PLANNING_REF = "invalid_planning_ref"
    PLANNING_AWAIT_TIMEOUT = "planning_await_timeout"
    PLANNING_UNAVAILABLE = "planning_unavailable"
    # terminal result error kinds
    PLANNER_FAILED = "planner_failed"
    INVALID_PLANNER_OUTPUT = "invalid_planner_output"
    PLANNER_CALLBACK_FAILED = "planner_callback_failed"
    INVALID_INITIAL_PLAN = "invalid_initial_plan"
    INVALID_REPLAN = "invalid_replan"
    INVALID_PLANNER_DECISION = "invalid_planner_decision"
    MAX_STEPS_EXCEEDED = "max_steps_exceeded"
    MAX_REPLANS_EXCEEDED = "max_replans_exceeded"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    STEP_FAILED = "step_failed"
    EMPTY_PLAN_EXECUTION = "empty_plan_execution"
    INVALID_PLANNER_RESULT = "invalid_planner_result"
    CANCELLED = "cancelled"
    INTERNAL_RESULT_VALIDATION_FAILED = "internal_result_validation_failed"
    RUN_CRASHED = "run_crashed"  # phloem: the run's own actor failed (a bug), reason = why
    # observation error kinds
    EXECUTOR_FAILED = "executor_failed"
    EXECUTOR_CALLBACK_FAILED = "executor_callback_failed"
    INVALID_EXECUTOR_RESULT = "invalid_executor_result"
    INVALID_EXECUTOR_OUTPUT = "invalid_executor_output"


K = PlanningErrorKind


class PlanError(PhloemError):
    """A plan, option or result document was rejected; `kind` says why."""

    def __init__(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(str(kind), message, details)


# --- JSON values ------------------------------------------------------------------------


class _PairsDict(dict[str, Any]):
    """A dict parsed from JSON text that remembers keys given more than once."""

    duplicates: frozenset[str] = frozenset()


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _PairsDict:
    out = _PairsDict()
    dups: set[str] = set()
    for key, value in pairs:
        if key in out:
            dups.add(key)
        out[key] = value
    if dups:
        out.duplicates = frozenset(dups)
    return out


def _reject_constant(name: str) -> Any:
    raise PlanError(K.INVALID_PLAN_JSON, f"{name} is not a JSON value")


def _parse_json_text(data: bytes | str, limit: int, what: str) -> Any:
    """Parse JSON text strictly: UTF-8, no NaN/Infinity, duplicate keys remembered."""
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        if len(raw) > limit:
            raise PlanError(
                K.PLAN_SIZE_LIMIT_EXCEEDED,
                f"{what} is {len(raw)} bytes, more than {limit}",
                {"limit": limit},
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PlanError(K.INVALID_PLAN_JSON, f"{what} is not valid UTF-8: {exc}") from None
    elif isinstance(data, str):
        text = data
        if len(text) > limit:
            raise PlanError(
                K.PLAN_SIZE_LIMIT_EXCEEDED,
                f"{what} is more than {limit} bytes",
                {"limit": limit},
            )
    else:
        raise TypeError("data must be bytes or str")
    try:
        return json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)
    except PlanError:
        raise
    except RecursionError:
        raise PlanError(K.INVALID_PLAN_JSON, f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise PlanError(K.INVALID_PLAN_JSON, f"{what} is not valid JSON: {exc}") from None


def _check_text(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PlanError(K.INVALID_PLAN_JSON, f"{path} is not valid UTF-8") from None


def json_value(value: Any, path: str = "$") -> Any:
    """A fresh copy of `value` as plain JSON data, or `invalid_plan_json` naming the path.

    Accepts None, bool, int, finite float, str (valid UTF-8), list/tuple and dicts with
    str keys, nested at most `MAX_JSON_DEPTH` deep. Everything else (functions, bytes,
    sets, objects, NaN) is rejected: plans and contexts carry data, never code.
    """
    return _json_value(value, path, 0)


def _json_value(value: Any, path: str, depth: int) -> Any:
    if depth > MAX_JSON_DEPTH:
        raise PlanError(K.INVALID_PLAN_JSON, f"{path} is nested more than {MAX_JSON_DEPTH} deep")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PlanError(K.INVALID_PLAN_JSON, f"{path} is not a finite number")
        return value
    if isinstance(value, str):
        _check_text(value, path)
        return value
    if isinstance(value, list | tuple):
        return [_json_value(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        dups = getattr(value, "duplicates", None)
        if dups:
            raise PlanError(K.INVALID_PLAN_JSON, f"{path} has duplicate key {sorted(dups)[0]!r}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PlanError(
                    K.INVALID_PLAN_JSON, f"{path} has a non-string key of type {type(key).__name__}"
                )
            _check_text(key, f"{path} key")
            out[key] = _json_value(item, f"{path}.{key}", depth + 1)
        return out
    raise PlanError(K.INVALID_PLAN_JSON, f"{path} is not JSON data ({type(value).__name__})")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: UTF-8, sorted keys, no whitespace. The basis of every size check."""
    return msgspec.json.encode(value, order="sorted")


# --- secret pruning (the rule lives in phloem.protocols.secrets) -----------------------


def sanitize(value: Any, path: str = "$") -> Any:
    """Check `value` is JSON data and prune its secrets: what crosses a public boundary."""
    return prune_secrets(json_value(value, path))


# --- plans ------------------------------------------------------------------------------


class Step(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One step: a non-empty id unique in its revision, a description and an opaque action."""

    id: str
    description: str
    action: dict[str, Any]
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A versioned plan. Build one with `Plan.new` (validated) or `decode`/`from_mapping`."""

    id: str
    revision: int
    goal: Any
    steps: tuple[Step, ...]
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def new(
        cls,
        id: str,
        revision: int,
        goal: Any,
        steps: list[Step] | tuple[Step, ...],
        metadata: Mapping[str, Any] | None = None,
    ) -> Plan:
        """A validated, secret-pruned plan (raises `PlanError`)."""
        return from_mapping(
            {
                "id": id,
                "revision": revision,
                "goal": goal,
                "steps": [to_builtins_step(s) for s in steps],
                "metadata": dict(metadata or {}),
            }
        )

    def to_builtins(self) -> dict[str, Any]:
        """The plan as plain JSON data with canonical field names."""
        return {
            "schema_version": self.schema_version,
            "id": self.id,
            "revision": self.revision,
            "goal": self.goal,
            "steps": [to_builtins_step(s) for s in self.steps],
            "metadata": self.metadata,
        }

    def size(self) -> int:
        """Canonical JSON size in bytes."""
        return len(canonical_json(self.to_builtins()))


def to_builtins_step(step: Step | Mapping[str, Any]) -> Any:
    if isinstance(step, Step):
        return {
            "id": step.id,
            "description": step.description,
            "action": step.action,
            "metadata": step.metadata,
        }
    return step


_PLAN_FIELDS = ("schema_version", "id", "revision", "goal", "steps", "metadata")
_STEP_FIELDS = ("id", "description", "action", "metadata")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _spelling(key: str) -> str:
    """The canonical spelling of a field name: snake_case, lower case."""
    return _CAMEL.sub(r"_\1", key).lower().replace("-", "_")


def _fields(
    obj: Mapping[str, Any], known: tuple[str, ...], unknown_kind: str, where: dict[str, Any]
) -> dict[str, Any]:
    """Map each key of `obj` to its canonical field, rejecting unknown and doubled ones."""
    dups = getattr(obj, "duplicates", None)
    if dups:
        name = sorted(dups)[0]
        raise PlanError(
            K.DUPLICATE_PLAN_FIELD, f"field {name!r} is given twice", where | {"field": name}
        )
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    unknown: list[str] = []
    for key, value in obj.items():
        if not isinstance(key, str):
            raise PlanError(
                K.INVALID_PLAN_JSON, f"non-string key of type {type(key).__name__}", where
            )
        canon = _spelling(key)
        if canon not in known:
            unknown.append(key)
            continue
        if canon in seen:
            raise PlanError(
                K.DUPLICATE_PLAN_FIELD,
                f"field {canon!r} is given twice, as {seen[canon]!r} and {key!r}",
                where | {"field": canon},
            )
        seen[canon] = key
        out[canon] = value
    if unknown:
        names = ", ".join(sorted(unknown))
        raise PlanError(
            unknown_kind, f"unknown fields: {names}", where | {"fields": sorted(unknown)}
        )
    return out


def _non_empty_text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _step_from(index: int, obj: Any) -> Step:
    where: dict[str, Any] = {"index": index}
    if isinstance(obj, Step):
        obj = to_builtins_step(obj)
    if not isinstance(obj, Mapping):
        raise PlanError(K.INVALID_PLAN_STEP, f"step {index} is not an object", where)
    fields = _fields(obj, _STEP_FIELDS, K.UNKNOWN_PLAN_STEP_FIELDS, where)
    for name in ("id", "description", "action"):
        if name not in fields:
            raise PlanError(
                K.MISSING_PLAN_FIELD, f"step {index} has no {name}", where | {"field": name}
            )
    sid, desc, action = fields["id"], fields["description"], fields["action"]
    meta = fields.get("metadata", {})
    if not _non_empty_text(sid):
        raise PlanError(K.INVALID_PLAN_STEP, f"step {index} id must be a non-empty string", where)
    if not _non_empty_text(desc):
        raise PlanError(
            K.INVALID_PLAN_STEP, f"step {index} description must be a non-empty string", where
        )
    if not isinstance(action, Mapping):
        raise PlanError(K.INVALID_PLAN_STEP, f"step {index} action must be an object", where)
    if not isinstance(meta, Mapping):
        raise PlanError(K.INVALID_PLAN_STEP, f"step {index} metadata must be an object", where)
    _check_text(sid, f"steps[{index}].id")
    _check_text(desc, f"steps[{index}].description")
    return Step(
        id=sid,
        description=desc,
        action=sanitize(action, f"$.steps[{index}].action"),
        metadata=sanitize(meta, f"$.steps[{index}].metadata"),
    )


def from_mapping(obj: Plan | Mapping[str, Any]) -> Plan:
    """Validate a plan given as a `Plan` or a JSON mapping; the canonical, pruned `Plan`."""
    if isinstance(obj, Plan):
        obj = obj.to_builtins()
    if not isinstance(obj, Mapping):
        raise PlanError(K.INVALID_PLAN_JSON, f"a plan must be an object, not {type(obj).__name__}")
    fields = _fields(obj, _PLAN_FIELDS, K.UNKNOWN_PLAN_FIELDS, {})
    version = fields.get("schema_version", SCHEMA_VERSION)
    if not _is_int(version) or version != SCHEMA_VERSION:
        raise PlanError(
            K.UNSUPPORTED_PLAN_SCHEMA_VERSION,
            f"schema_version must be {SCHEMA_VERSION}",
            {"schema_version": version if _is_int(version) else None},
        )
    for name in ("id", "revision", "goal", "steps"):
        if name not in fields:
            raise PlanError(K.MISSING_PLAN_FIELD, f"plan has no {name}", {"field": name})
    pid, revision, steps = fields["id"], fields["revision"], fields["steps"]
    meta = fields.get("metadata", {})
    if not _non_empty_text(pid):
        raise PlanError(K.INVALID_PLAN_FIELD, "id must be a non-empty string", {"field": "id"})
    _check_text(pid, "$.id")
    if not _is_int(revision) or revision < 0:
        raise PlanError(K.INVALID_PLAN_FIELD, "revision must be an int >= 0", {"field": "revision"})
    if not isinstance(steps, list | tuple) or not steps:
        raise PlanError(K.INVALID_PLAN_FIELD, "steps must be a non-empty list", {"field": "steps"})
    if not isinstance(meta, Mapping):
        raise PlanError(K.INVALID_PLAN_FIELD, "metadata must be an object", {"field": "metadata"})
    parsed = tuple(_step_from(i, s) for i, s in enumerate(steps))
    ids: set[str] = set()
    for i, step in enumerate(parsed):
        if step.id in ids:
            raise PlanError(
                K.DUPLICATE_PLAN_STEP_ID,
                f"step id {step.id!r} is repeated",
                {"index": i, "step_id": step.id},
            )
        ids.add(step.id)
    return Plan(
        id=pid,
        revision=revision,
        goal=sanitize(fields["goal"], "$.goal"),
        steps=parsed,
        metadata=sanitize(meta, "$.metadata"),
    )


def decode(data: bytes | str | Mapping[str, Any] | Plan) -> Plan:
    """Decode and validate a plan from JSON text (bytes or str), a mapping or a `Plan`."""
    if isinstance(data, bytes | bytearray | memoryview | str):
        parsed: Any = _parse_json_text(data, MAX_PLAN_DOCUMENT_BYTES, "plan")
        return from_mapping(parsed)
    return from_mapping(data)


def encode(plan: Plan | Mapping[str, Any]) -> bytes:
    """Validate `plan` (same rules as `decode`) and return its canonical JSON."""
    return canonical_json(from_mapping(plan).to_builtins())


def _check_size(plan: Plan, max_plan_bytes: int) -> None:
    size = plan.size()
    if size > max_plan_bytes:
        raise PlanError(
            K.PLAN_SIZE_LIMIT_EXCEEDED,
            f"plan is {size} bytes of canonical JSON, more than max_plan_bytes {max_plan_bytes}",
            {"limit": max_plan_bytes, "size": size},
        )


def check_initial_plan(plan: Plan, goal: Any, max_plan_bytes: int) -> None:
    """An initial plan has revision 0, the run's (sanitized) goal, and fits the budget."""
    if plan.revision != 0:
        raise PlanError(K.INVALID_PLAN_IDENTITY, "initial plan revision must be 0")
    if plan.goal != goal:
        raise PlanError(K.INVALID_PLAN_IDENTITY, "initial plan goal must equal the run's goal")
    _check_size(plan, max_plan_bytes)


def check_replacement_plan(current: Plan, new: Plan, max_plan_bytes: int) -> None:
    """A replacement keeps id and goal and has revision = current + 1, within the budget."""
    if new.id != current.id:
        raise PlanError(K.INVALID_PLAN_IDENTITY, "replacement plan id must equal the current id")
    if new.goal != current.goal:
        raise PlanError(
            K.INVALID_PLAN_IDENTITY, "replacement plan goal must equal the current goal"
        )
    if new.revision != current.revision + 1:
        raise PlanError(
            K.INVALID_PLAN_IDENTITY,
            f"replacement plan revision must be {current.revision + 1}",
        )
    _check_size(new, max_plan_bytes)


# --- callback outcomes ------------------------------------------------------------------


class Ok(msgspec.Struct, frozen=True, tag="ok"):
    """Success: a planner's initial plan (a `Plan` or mapping), or an executor's output."""

    value: Any = None


class Complete(msgspec.Struct, frozen=True, tag="complete"):
    """The planner ends the run successfully with `value` as the result."""

    value: Any = None


class Continue(msgspec.Struct, frozen=True, tag="continue"):
    """The planner accepts the observation; the run goes on with the next step."""


class Replan(msgspec.Struct, frozen=True, tag="replan"):
    """The planner replaces the plan (same id and goal, next revision)."""

    plan: Any


class Fail(msgspec.Struct, frozen=True, tag="fail"):
    """The planner ends the run as failed (`planner_failed`) with `reason`."""

    reason: Any = None


class Error(msgspec.Struct, frozen=True, tag="error"):
    """The callback could not do its job; `reason` is JSON data."""

    reason: Any = None


PlannerOutcome: TypeAlias = Ok | Complete | Error
PlannerDecision: TypeAlias = Continue | Replan | Complete | Fail | Error
ExecutorOutcome: TypeAlias = Ok | Error


# --- options ----------------------------------------------------------------------------

MIB = 1024 * 1024
# option: (default, minimum, maximum)
OPTION_RANGES: dict[str, tuple[int, int, int]] = {
    "max_steps": (16, 1, 100_000),
    "max_replans": (3, 0, 10_000),
    "timeout_ms": (60_000, 1, 24 * 3600 * 1000),
    "callback_timeout_ms": (10_000, 1, 3600 * 1000),
    "max_memory_bytes": (256 * MIB, 16 * MIB, 64 * 1024 * MIB),
    "max_plan_bytes": (MIB, 1, MAX_PLAN_DOCUMENT_BYTES),
}
# Canonical JSON size allowed for `result_metadata`.
MAX_RESULT_METADATA_BYTES = 64 * 1024


class PlanningOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Budgets of one planning run. Build with `parse_options` (validated)."""

    max_steps: int = 16
    max_replans: int = 3
    timeout_ms: int = 60_000
    callback_timeout_ms: int = 10_000
    max_memory_bytes: int = 256 * MIB
    max_plan_bytes: int = MIB
    result_metadata: dict[str, Any] = msgspec.field(default_factory=dict)


DEFAULT_OPTIONS = PlanningOptions()


def _option_error(message: str, option: str | None = None) -> PlanError:
    return PlanError(K.INVALID_PLANNING_OPTIONS, message, {"option": option} if option else None)


def parse_options(options: Mapping[str, Any] | PlanningOptions | None = None) -> PlanningOptions:
    """Validate options; unknown names and out-of-range values → `invalid_planning_options`."""
    if options is None:
        return DEFAULT_OPTIONS
    if isinstance(options, PlanningOptions):
        options = msgspec.structs.asdict(options)
    if not isinstance(options, Mapping):
        raise _option_error("options must be an object")
    values: dict[str, Any] = {}
    for name, value in options.items():
        if name == "result_metadata":
            if not isinstance(value, Mapping):
                raise _option_error("result_metadata must be an object", name)
            try:
                meta = sanitize(value, "$.result_metadata")
            except PlanError as exc:
                raise _option_error(f"result_metadata: {exc.message}", name) from None
            size = len(canonical_json(meta))
            if size > MAX_RESULT_METADATA_BYTES:
                raise _option_error(
                    f"result_metadata must be <= {MAX_RESULT_METADATA_BYTES} bytes", name
                )
            values[name] = meta
            continue
        if name not in OPTION_RANGES:
            hint = "; use max_memory_bytes" if name == "max_heap_words" else ""
            raise _option_error(f"unknown option {name!r}{hint}", str(name))
        _, lo, hi = OPTION_RANGES[name]
        if not _is_int(value):
            raise _option_error(f"{name} must be an int", name)
        if value < lo:
            raise _option_error(f"{name} must be >= {lo}", name)
        if value > hi:
            raise _option_error(f"{name} must be <= {hi}", name)
        values[name] = value
    return PlanningOptions(**values)


# --- results ----------------------------------------------------------------------------

Status: TypeAlias = Literal["completed", "failed", "cancelled"]
_STATUSES = ("completed", "failed", "cancelled")


class ResultError(msgspec.Struct, frozen=True, omit_defaults=True):
    """A structured error: a stable `kind`, an optional JSON `reason`, an optional `limit`."""

    kind: str
    reason: Any | msgspec.UnsetType = msgspec.UNSET
    limit: int | msgspec.UnsetType = msgspec.UNSET

    def to_builtins(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.reason is not msgspec.UNSET:
            out["reason"] = self.reason
        if self.limit is not msgspec.UNSET:
            out["limit"] = self.limit
        return out


class Observation(msgspec.Struct, frozen=True, omit_defaults=True):
    """What one executor call produced: `output` when status is ok, `error` otherwise."""

    plan_id: str
    revision: int
    step_id: str
    attempt: int
    status: Literal["ok", "error"]
    output: Any | msgspec.UnsetType = msgspec.UNSET
    error: ResultError | msgspec.UnsetType = msgspec.UNSET

    def to_builtins(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "plan_id": self.plan_id,
            "revision": self.revision,
            "step_id": self.step_id,
            "attempt": self.attempt,
            "status": self.status,
        }
        if self.status == "ok":
            out["output"] = self.output
        else:
            assert isinstance(self.error, ResultError)
            out["error"] = self.error.to_builtins()
        return out


class PlanningResult(msgspec.Struct, frozen=True):
    """The terminal value of every planning run (result schema version 1)."""

    status: Status
    plan: Plan | None
    steps_executed: int
    replans: int
    duration_ms: int
    observations: tuple[Observation, ...]
    result: Any
    error: ResultError | None
    metadata: dict[str, Any]
    result_schema_version: int = RESULT_SCHEMA_VERSION

    def to_builtins(self) -> dict[str, Any]:
        return {
            "result_schema_version": self.result_schema_version,
            "status": self.status,
            "plan": None if self.plan is None else self.plan.to_builtins(),
            "steps_executed": self.steps_executed,
            "replans": self.replans,
            "duration_ms": self.duration_ms,
            "observations": [o.to_builtins() for o in self.observations],
            "result": self.result,
            "error": None if self.error is None else self.error.to_builtins(),
            "metadata": self.metadata,
        }


_RESULT_FIELDS = frozenset(
    {
        "result_schema_version",
        "status",
        "plan",
        "steps_executed",
        "replans",
        "duration_ms",
        "observations",
        "result",
        "error",
        "metadata",
    }
)
_OBS_FIELDS = frozenset({"plan_id", "revision", "step_id", "attempt", "status"})


def _bad_result(message: str) -> PlanError:
    return PlanError(K.INVALID_PLANNING_RESULT, message)


def _exact_keys(obj: Any, required: frozenset[str], optional: frozenset[str], what: str) -> None:
    if not isinstance(obj, Mapping):
        raise _bad_result(f"{what} must be an object")
    dups = getattr(obj, "duplicates", None)
    if dups:
        raise _bad_result(f"{what} has duplicate key {sorted(dups)[0]!r}")
    keys = set(obj)
    missing = required - keys
    extra = keys - required - optional
    if missing:
        raise _bad_result(f"{what} is missing {', '.join(sorted(missing))}")
    if extra:
        raise _bad_result(f"{what} has unknown keys {', '.join(sorted(extra))}")


def _count(obj: Mapping[str, Any], name: str, what: str) -> int:
    value = obj[name]
    if not _is_int(value) or value < 0:
        raise _bad_result(f"{what}.{name} must be an int >= 0")
    return int(value)


def _result_error(obj: Any, what: str) -> ResultError:
    _exact_keys(obj, frozenset({"kind"}), frozenset({"reason", "limit"}), what)
    kind = obj["kind"]
    if not _non_empty_text(kind):
        raise _bad_result(f"{what}.kind must be a non-empty string")
    limit = obj.get("limit", msgspec.UNSET)
    if limit is not msgspec.UNSET and not _is_int(limit):
        raise _bad_result(f"{what}.limit must be an int")
    return ResultError(kind=kind, reason=obj.get("reason", msgspec.UNSET), limit=limit)


def _observation(obj: Any, index: int) -> Observation:
    what = f"observations[{index}]"
    _exact_keys(obj, _OBS_FIELDS, frozenset({"output", "error"}), what)
    status = obj["status"]
    output: Any
    error: ResultError | msgspec.UnsetType
    if status == "ok":
        if "output" not in obj or "error" in obj:
            raise _bad_result(f"{what} with status ok must have output and no error")
        output, error = obj["output"], msgspec.UNSET
    elif status == "error":
        if "error" not in obj or "output" in obj:
            raise _bad_result(f"{what} with status error must have error and no output")
        output, error = msgspec.UNSET, _result_error(obj["error"], f"{what}.error")
    else:
        raise _bad_result(f"{what}.status must be ok or error")
    for name in ("plan_id", "step_id"):
        if not _non_empty_text(obj[name]):
            raise _bad_result(f"{what}.{name} must be a non-empty string")
    return Observation(
        plan_id=obj["plan_id"],
        revision=_count(obj, "revision", what),
        step_id=obj["step_id"],
        attempt=_count(obj, "attempt", what),
        status=status,
        output=output,
        error=error,
    )


def check_result(result: PlanningResult) -> None:
    """Raise `invalid_planning_result` unless status, result and error agree."""
    if result.result_schema_version != RESULT_SCHEMA_VERSION:
        raise _bad_result(f"result_schema_version must be {RESULT_SCHEMA_VERSION}")
    if result.status not in _STATUSES:
        raise _bad_result("status must be completed, failed or cancelled")
    if result.status == "completed" and result.error is not None:
        raise _bad_result("a completed result must have a null error")
    if result.status != "completed":
        if result.error is None:
            raise _bad_result(f"a {result.status} result must have an error")
        if result.result is not None:
            raise _bad_result(f"a {result.status} result must have a null result")
        if result.status == "cancelled" and result.error.kind != K.CANCELLED:
            raise _bad_result("a cancelled result must have error kind cancelled")


def decode_result(data: bytes | str | Mapping[str, Any]) -> PlanningResult:
    """Strictly decode a result document: exact keys, version 1, consistent status/error."""
    try:
        obj = (
            _parse_json_text(data, MAX_RESULT_DOCUMENT_BYTES, "result")
            if isinstance(data, bytes | bytearray | memoryview | str)
            else json_value(data)
        )
        _exact_keys(obj, _RESULT_FIELDS, frozenset(), "result")
        version = obj["result_schema_version"]
        if not _is_int(version) or version != RESULT_SCHEMA_VERSION:
            raise _bad_result(f"result_schema_version must be {RESULT_SCHEMA_VERSION}")
        status = obj["status"]
        if status not in _STATUSES:
            raise _bad_result("status must be completed, failed or cancelled")
        observations = obj["observations"]
        if not isinstance(observations, list):
            raise _bad_result("observations must be a list")
        if not isinstance(obj["metadata"], Mapping):
            raise _bad_result("metadata must be an object")
        plan = None if obj["plan"] is None else from_mapping(obj["plan"])
        error = None if obj["error"] is None else _result_error(obj["error"], "error")
        result = PlanningResult(
            status=status,
            plan=plan,
            steps_executed=_count(obj, "steps_executed", "result"),
            replans=_count(obj, "replans", "result"),
            duration_ms=_count(obj, "duration_ms", "result"),
            observations=tuple(_observation(o, i) for i, o in enumerate(observations)),
            result=json_value(obj["result"], "$.result"),
            error=error,
            metadata=json_value(obj["metadata"], "$.metadata"),
        )
        check_result(result)
        return result
    except PlanError as exc:
        if exc.kind == K.INVALID_PLANNING_RESULT:
            raise
        raise _bad_result(f"{exc.kind}: {exc.message}") from None


def encode_result(result: PlanningResult) -> bytes:
    """Canonical JSON of a result, after checking it is consistent."""
    check_result(result)
    return canonical_json(result.to_builtins())


# --- service requests (client ↔ the `planning` service) -----------------------------------


class OpenPlanningEvents(msgspec.Struct, frozen=True, tag="open_events"):
    """Open an owner-bound event topic for a run about to start; the reply is its name."""


class StartPlanning(msgspec.Struct, frozen=True, tag="start"):
    """Start a run. Adapters are configured names or `{name, target, config}` mappings.

    `events` names a topic from `OpenPlanningEvents` that receives the run's events.
    """

    planner: Any
    executor: Any
    goal: Any = None
    context: Any = None
    options: dict[str, Any] | None = None
    events: str | None = None


class AwaitPlanning(msgspec.Struct, frozen=True, tag="await"):
    """Wait up to `timeout_s` (None: until it ends) for the run's result."""

    ref: Any
    timeout_s: float | None = None


class CancelPlanning(msgspec.Struct, frozen=True, tag="cancel"):
    """Cancel the run; its result becomes `cancelled` with the (redacted) `reason`."""

    ref: Any
    reason: Any = "user_cancelled"


PlanningRequest: TypeAlias = OpenPlanningEvents | StartPlanning | AwaitPlanning | CancelPlanning


class PlanningStarted(msgspec.Struct, frozen=True):
    """The reply to `StartPlanning`: the run's opaque, owner-bound ref."""

    ref: str


class PlanningCancelled(msgspec.Struct, frozen=True):
    """The reply to `CancelPlanning`: False if the run had already ended."""

    cancelled: bool
