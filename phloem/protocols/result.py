"""Planning results and callback outcomes: what a run ends with, what callbacks return.

The terminal *result* (result schema version 1) has exactly the fields of
`PlanningResult`::

    result = {result_schema_version, status, plan, steps_executed, replans, duration_ms,
              observations, result, error, metadata}

`status` is ``completed`` (with ``error: null``), ``failed`` or ``cancelled`` (with
``result: null`` and an `error` ``{kind, reason?, limit?}``; a cancelled result's kind is
``cancelled``). Each `Observation` records one executor call. `encode_result` writes the
canonical JSON of a consistent result; `decode_result` strictly reads one and rejects
extra or missing keys, other versions and inconsistent status/error combinations with
`invalid_planning_result`.

Planner and executor callbacks answer with the tagged *outcomes* `Ok`, `Complete`,
`Continue`, `Replan`, `Fail` and `Error` (`PlannerOutcome`, `PlannerDecision`,
`ExecutorOutcome` say which callback may return which).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import msgspec

from phloem.protocols.errors import ErrorKind as K
from phloem.protocols.jsonvalue import canonical_json, duplicate_keys, is_int
from phloem.protocols.limits import RangeError, RangeTypeError, check_range
from phloem.protocols.plan import (
    Plan,
    PlanError,
    from_mapping,
    parse_document,
    planning_json,
)
from phloem.protocols.secrets import redact_value

__all__ = [
    "MAX_RESULT_DOCUMENT_BYTES",
    "RESULT_SCHEMA_VERSION",
    "Complete",
    "Continue",
    "Error",
    "ExecutorOutcome",
    "Fail",
    "Observation",
    "Ok",
    "PlannerDecision",
    "PlannerOutcome",
    "PlanningResult",
    "Replan",
    "ResultError",
    "Status",
    "check_result",
    "decode_result",
    "encode_result",
]

RESULT_SCHEMA_VERSION = 1

# Largest result document `decode_result` will parse at all.
MAX_RESULT_DOCUMENT_BYTES = 64 * 1024 * 1024


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


# --- the result document ---------------------------------------------------------------

Status: TypeAlias = Literal["completed", "failed", "cancelled"]
_STATUSES = ("completed", "failed", "cancelled")


class ResultError(msgspec.Struct, frozen=True, omit_defaults=True):
    """A structured error: a stable `kind`, an optional JSON `reason`, an optional `limit`.

    Made or decoded, its `reason` is redacted (`protocols.secrets.redact_value`: secret
    keys pruned, every string redacted), whichever adapter or path produced it.
    """

    kind: str
    reason: Any | msgspec.UnsetType = msgspec.UNSET
    limit: int | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        if self.reason is not msgspec.UNSET:
            msgspec.structs.force_setattr(self, "reason", redact_value(self.reason))

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


def _non_empty_text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _bad_result(message: str) -> PlanError:
    return PlanError(K.INVALID_PLANNING_RESULT, message)


def _exact_keys(obj: Any, required: frozenset[str], optional: frozenset[str], what: str) -> None:
    if not isinstance(obj, Mapping):
        raise _bad_result(f"{what} must be an object")
    dups = duplicate_keys(obj)
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
    try:
        return check_range(f"{what}.{name}", obj[name], 0, None)
    except (RangeError, RangeTypeError) as exc:
        raise _bad_result(exc.message) from None


def _result_error(obj: Any, what: str) -> ResultError:
    _exact_keys(obj, frozenset({"kind"}), frozenset({"reason", "limit"}), what)
    kind = obj["kind"]
    if not _non_empty_text(kind):
        raise _bad_result(f"{what}.kind must be a non-empty string")
    limit = obj.get("limit", msgspec.UNSET)
    if limit is not msgspec.UNSET and not is_int(limit):
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
            parse_document(data, MAX_RESULT_DOCUMENT_BYTES, "result")
            if isinstance(data, bytes | bytearray | memoryview | str)
            else planning_json(data)
        )
        _exact_keys(obj, _RESULT_FIELDS, frozenset(), "result")
        version = obj["result_schema_version"]
        if not is_int(version) or version != RESULT_SCHEMA_VERSION:
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
            result=planning_json(obj["result"], "$.result"),
            error=error,
            metadata=planning_json(obj["metadata"], "$.metadata"),
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
