"""Plans and planning options: the plan document, its codec, its rejections.

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
  duplicate keys, nesting beyond `MAX_JSON_DEPTH` (`invalid_plan_json`; the rule is
  `phloem.protocols.jsonvalue`);
- another schema version (`unsupported_plan_schema_version`).

`sanitize` is what every document crossing a public boundary (plans, goals, contexts,
observations, cancellation reasons, results) goes through: checked to be JSON data, then
credential-shaped keys removed by `prune_secrets` (the one rule, `phloem.protocols.secrets`:
``access_token`` and ``refresh_tokens: ["…"]`` go, counts such as ``max_tokens: 1024`` stay).

`PlanningOptions` are the budgets of one run, `parse_options` checks them against
`OPTION_RANGES`. The terminal result document and the callback outcomes are in
`phloem.protocols.result`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import (
    JsonValueError,
    canonical_json,
    duplicate_keys,
    is_int,
    json_size,
    json_value,
    parse_json_text,
)
from phloem.protocols.limits import RangeError, RangeTypeError, check_range
from phloem.protocols.secrets import prune_secrets

__all__ = [
    "DEFAULT_OPTIONS",
    "MAX_PLAN_DOCUMENT_BYTES",
    "MAX_RESULT_METADATA_BYTES",
    "OPTION_RANGES",
    "SCHEMA_VERSION",
    "Plan",
    "PlanError",
    "PlanningOptions",
    "Step",
    "check_initial_plan",
    "check_replacement_plan",
    "decode",
    "encode",
    "from_mapping",
    "is_idempotent",
    "parse_document",
    "parse_options",
    "planning_json",
    "sanitize",
]

SCHEMA_VERSION = 1

# Largest plan document `decode` will parse at all (the per-run `max_plan_bytes` check
# comes after; its hard maximum is the same).
MAX_PLAN_DOCUMENT_BYTES = 16 * 1024 * 1024


K = ErrorKind  # planning kinds are ErrorKind members


class PlanError(PhloemError):
    """A plan, option or result document was rejected; `kind` says why."""

    def __init__(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(str(kind), message, details)


# --- JSON data of the planning runtime (the rule is phloem.protocols.jsonvalue) ---------


def planning_json(value: Any, path: str = "$") -> Any:
    """`json_value` for the planning runtime: a plain copy, or `PlanError` `invalid_plan_json`."""
    try:
        return json_value(value, path)
    except JsonValueError as exc:
        raise PlanError(K.INVALID_PLAN_JSON, str(exc)) from None


def sanitize(value: Any, path: str = "$") -> Any:
    """Check `value` is JSON data and prune its secrets: what crosses a public boundary."""
    return prune_secrets(planning_json(value, path))


def parse_document(data: bytes | bytearray | memoryview | str, limit: int, what: str) -> Any:
    """Parse a plan or result document's JSON text strictly, if it is at most `limit` bytes.

    Too long: `plan_size_limit_exceeded`; not strict JSON: `invalid_plan_json`.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        size = len(data) if isinstance(data, bytes | bytearray) else data.nbytes
        if size > limit:
            raise PlanError(
                K.PLAN_SIZE_LIMIT_EXCEEDED,
                f"{what} is {size} bytes, more than {limit}",
                {"limit": limit},
            )
    elif isinstance(data, str):
        if len(data) > limit:
            raise PlanError(
                K.PLAN_SIZE_LIMIT_EXCEEDED,
                f"{what} is more than {limit} bytes",
                {"limit": limit},
            )
    else:
        raise TypeError("data must be bytes or str")
    try:
        return parse_json_text(data, what)
    except JsonValueError as exc:
        raise PlanError(K.INVALID_PLAN_JSON, str(exc)) from None


# --- plans ------------------------------------------------------------------------------


class Step(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One step: a non-empty id unique in its revision, a description and an opaque action.

    Constructing one validates it (`invalid_plan_step`, `invalid_plan_json`) and prunes
    secrets from its action and metadata: a `Step` in hand is canonical step data, as the
    reference's `step/3,4` constructors make, not a shape checked only by `Plan.new`."""

    id: str
    description: str
    action: dict[str, Any]
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("id", "description"):
            if not _non_empty_text(getattr(self, name)):
                raise PlanError(
                    K.INVALID_PLAN_STEP, f"step {name} must be a non-empty string", {"field": name}
                )
        for name in ("action", "metadata"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise PlanError(
                    K.INVALID_PLAN_STEP, f"step {name} must be an object", {"field": name}
                )
            msgspec.structs.force_setattr(self, name, sanitize(dict(value), f"$.{name}"))


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
        return json_size(self.to_builtins())


def is_idempotent(step: Step) -> bool:
    """Whether the step declares that running it twice does no harm
    (`metadata.idempotent = true`): a durable run retries such a step when a crash cut it
    short, and ends `interrupted` on any other (docs/durable-runs.md)."""
    return step.metadata.get("idempotent") is True


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
    dups = duplicate_keys(obj)
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
    planning_json(sid, f"steps[{index}].id")
    planning_json(desc, f"steps[{index}].description")
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
    if not is_int(version) or version != SCHEMA_VERSION:
        raise PlanError(
            K.UNSUPPORTED_PLAN_SCHEMA_VERSION,
            f"schema_version must be {SCHEMA_VERSION}",
            {"schema_version": version if is_int(version) else None},
        )
    for name in ("id", "revision", "goal", "steps"):
        if name not in fields:
            raise PlanError(K.MISSING_PLAN_FIELD, f"plan has no {name}", {"field": name})
    pid, revision, steps = fields["id"], fields["revision"], fields["steps"]
    meta = fields.get("metadata", {})
    if not _non_empty_text(pid):
        raise PlanError(K.INVALID_PLAN_FIELD, "id must be a non-empty string", {"field": "id"})
    planning_json(pid, "$.id")
    try:
        check_range("revision", revision, 0, None)
    except (RangeError, RangeTypeError) as exc:
        raise PlanError(K.INVALID_PLAN_FIELD, exc.message, {"field": "revision"}) from None
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
        parsed: Any = parse_document(data, MAX_PLAN_DOCUMENT_BYTES, "plan")
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
    # Journal the run so that it survives a daemon crash (None: the service's default,
    # `[planning] durable`); see docs/durable-runs.md.
    durable: bool | None = None


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
        if name == "durable":
            if value is not None and not isinstance(value, bool):
                raise _option_error("durable must be true or false", name)
            values[name] = value
            continue
        if name == "result_metadata":
            if not isinstance(value, Mapping):
                raise _option_error("result_metadata must be an object", name)
            try:
                meta = sanitize(value, "$.result_metadata")
            except PlanError as exc:
                raise _option_error(f"result_metadata: {exc.message}", name) from None
            size = json_size(meta)
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
        try:
            values[name] = check_range(name, value, lo, hi)
        except (RangeError, RangeTypeError) as exc:
            raise _option_error(exc.message, name) from None
    return PlanningOptions(**values)
