"""The tool contract: `Tool`, `ToolContext` and argument validation.

A tool has a `name`, a `description`, an exact JSON input schema (an object schema with
`additionalProperties: false`) and `run(args, ctx) -> dict`. `run` validates the arguments
against the schema first (unknown keys, missing required keys and wrong types, including
1.5 for an integer, fail with error code `arguments`), fills defaults, then calls the
tool's `call`. Failures come back as values: `{"error": code, "message": ...}`.
"""

from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import structlog

from phloem.protocols.content import FunctionDeclaration
from phloem.protocols.jsonvalue import json_size
from phloem.tools.errors import ToolFailure
from phloem.tools.outputlimit import OutputBudget, OutputPolicy, Report, apply_with_grant
from phloem.tools.workspace import Touch, Workspace

log = structlog.get_logger(__name__)

JSON = dict[str, Any]


@dataclass(frozen=True)
class ToolWarning:
    """A structured warning: stable `code`, file `path` (workspace-relative) and `line`."""

    code: str
    path: str
    line: int
    message: str
    source: str = "walk"

    def to_dict(self) -> JSON:
        return {"code": self.code, "path": self.path, "line": self.line, "source": self.source}


@dataclass
class ToolContext:
    """Everything a tool call may use besides its arguments.

    `session` keys the read ledger and the output budget; `cancel` aborts the call with
    `cancelled`; `on_touch` and `on_warning` receive touches and walk warnings.
    """

    workspace: Workspace
    session: str = "default"
    cancel: threading.Event = field(default_factory=threading.Event)
    policy: OutputPolicy = field(default_factory=OutputPolicy)
    budget: OutputBudget | None = None
    on_touch: Callable[[Touch], None] | None = None
    on_warning: Callable[[ToolWarning], None] | None = None

    def check_cancelled(self) -> None:
        if self.cancel.is_set():
            raise ToolFailure("cancelled", "the tool call was cancelled")

    def touch(self, kind: str, path: str) -> None:
        if self.on_touch is not None:
            self.on_touch(Touch(self.session, kind, path))

    def warn(self, warning: ToolWarning) -> None:
        log.warning(warning.code, path=warning.path, line=warning.line, detail=warning.message)
        if self.on_warning is not None:
            self.on_warning(warning)

    def limit(self, text: str, policy: OutputPolicy | None = None) -> tuple[str, Report]:
        """Apply the output policy and this session's budget to `text`, charging the budget."""
        chosen = policy or self.policy
        if self.budget is None:
            return apply_with_grant(chosen, text, None)
        grant = self.budget.reserve(self.session, chosen.max_bytes)
        output = ""
        try:
            output, report = apply_with_grant(chosen, text, grant)
        finally:
            self.budget.consume(self.session, grant, len(output.encode()))
        return output, report

    def bound_list(self, result: JSON, key: str) -> JSON:
        """Keep the longest prefix of `result[key]` whose JSON encoding fits the policy's
        byte limit and this session's budget grant; mark `truncated` when items go."""
        items: list[Any] = result[key]
        limit = self.policy.max_bytes if self.policy.max_bytes > 0 else None
        grant = None
        if self.budget is not None:
            grant = self.budget.reserve(self.session, self.policy.max_bytes)
            limit = grant if limit is None else min(limit, grant)
        size = json_size(result)
        try:
            if limit is None or size <= limit:
                return result
            low, high = 0, len(items)
            while low < high:
                middle = (low + high + 1) // 2
                if json_size({**result, key: items[:middle], "truncated": True}) <= limit:
                    low = middle
                else:
                    high = middle - 1
            result = {**result, key: items[:low], "truncated": True}
            size = json_size(result)
            return result
        finally:
            if self.budget is not None and grant is not None:
                self.budget.consume(self.session, grant, size)


class Tool(ABC):
    """A named operation with an exact JSON input schema; see the module docstring."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_schema: ClassVar[JSON]
    read_only: ClassVar[bool] = False
    """True when the tool never changes the workspace (safe for planning examples)."""

    def run(self, args: Any, ctx: ToolContext) -> JSON:
        """Validate `args`, run the tool, and return its result or failure value."""
        try:
            ctx.check_cancelled()
            checked = validate_arguments(self.input_schema, args)
            return self.call(checked, ctx)
        except ToolFailure as failure:
            return failure.to_value()
        except OSError as exc:
            return ToolFailure("io", f"{self.name}: {exc.strerror or exc}").to_value()

    @abstractmethod
    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        """Run with validated arguments (defaults filled); raise `ToolFailure` to fail."""

    def declaration(self) -> FunctionDeclaration:
        """The tool as a model-facing function declaration (name, description, schema)."""
        return FunctionDeclaration(
            name=self.name, description=self.description, parameters=self.input_schema
        )

    def describe(self) -> JSON:
        """Name, description and input schema, as handed to a model."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


def is_failure(result: Mapping[str, Any]) -> bool:
    """True for a failure value (it carries an `error` code)."""
    return isinstance(result.get("error"), str) and bool(result.get("error"))


# -- argument validation ---------------------------------------------------------------

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
}


def _check_type(name: str, kind: str, value: Any) -> Any:
    """Return `value` (integral floats become ints) or raise for a wrong JSON type."""
    ok: bool
    if kind == "string":
        ok = isinstance(value, str)
    elif kind == "boolean":
        ok = isinstance(value, bool)
    elif kind == "integer":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and math.isfinite(value)
    elif kind == "array":
        ok = isinstance(value, list)
    elif kind == "object":
        ok = isinstance(value, dict)
    else:
        raise ValueError(f"unsupported schema type {kind!r} for {name}")
    if not ok:
        raise ToolFailure("arguments", f"{name} must be {_TYPE_NAMES[kind]}")
    return value


def _check_value(name: str, spec: Mapping[str, Any], value: Any) -> Any:
    value = _check_type(name, spec["type"], value)
    if "enum" in spec and value not in spec["enum"]:
        choices = ", ".join(str(choice) for choice in spec["enum"])
        raise ToolFailure("arguments", f"{name} must be one of {choices}")
    if "minimum" in spec and value < spec["minimum"]:
        raise ToolFailure("arguments", f"{name} must be >= {spec['minimum']}")
    if "maximum" in spec and value > spec["maximum"]:
        raise ToolFailure("arguments", f"{name} must be <= {spec['maximum']}")
    if "minLength" in spec and len(value) < spec["minLength"]:
        if spec["minLength"] == 1:
            raise ToolFailure("arguments", f"{name} must not be empty")
        raise ToolFailure("arguments", f"{name} must have at least {spec['minLength']} characters")
    if "maxLength" in spec and len(value) > spec["maxLength"]:
        raise ToolFailure("arguments", f"{name} must have at most {spec['maxLength']} characters")
    if spec["type"] == "array" and "items" in spec:
        return [_check_value(f"{name}[{i}]", spec["items"], item) for i, item in enumerate(value)]
    return value


def validate_arguments(schema: Mapping[str, Any], args: Any) -> JSON:
    """Check `args` against an object schema; return a copy with defaults filled in."""
    if not isinstance(args, dict):
        raise ToolFailure("arguments", "arguments must be a JSON object")
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key in args:
        if key not in properties:
            raise ToolFailure("arguments", f"unknown argument {key}")
    for key in schema.get("required", ()):
        if key not in args:
            raise ToolFailure("arguments", f"{key} is required")
    checked: JSON = {}
    for key, spec in properties.items():
        if key in args:
            checked[key] = _check_value(key, spec, args[key])
        elif "default" in spec:
            checked[key] = spec["default"]
    return checked


def object_schema(properties: JSON, required: list[str]) -> JSON:
    """An exact object schema: listed properties only (`additionalProperties: false`)."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
