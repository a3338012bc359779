"""The one tool contract: `Tool`, `ToolContext`, argument validation and failure values.

Every callable tool — a coding tool, a plain Python function (`FunctionTool`), an agent's
`exit_loop` — is a `Tool`: a `name`, a `description`, an exact JSON input schema (an
object schema with `additionalProperties: false`) and `run(args, ctx) -> dict`. `run`
validates the arguments against the schema first (unknown keys, missing required keys
and wrong types, including 1.5 for an integer, fail with error code `arguments`), fills
defaults, then calls the tool's `call`. Failures come back as values with a stable code:
`{"error": code, "message": ...}`. No exception leaves `run`: a string argument that is
not Unicode text (a lone surrogate, which no UTF-8 can carry) is an `arguments` failure,
an `OSError` is `io`, and any other exception — a bug in the tool — is logged and becomes
the failure value `exception` with the redacted `Type: message` (an `LlmAgent` hands it to
the model like any result; a one-shot run stops with `tool_panic`).

`tool.declaration()` is the one conversion to a model-facing `FunctionDeclaration`;
`as_tool` turns a plain callable into a `FunctionTool`; `unknown_tool(name)` is the
failure value for a call of a tool nobody declared.
"""

from __future__ import annotations

import copy
import inspect
import math
import re
import threading
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

from phloem.base.logs import get_logger
from phloem.protocols.content import FunctionDeclaration, RawToolResult
from phloem.protocols.jsonvalue import json_size
from phloem.protocols.limits import RangeError, check_range
from phloem.protocols.secrets import redact
from phloem.protocols.warnings import RunWarning
from phloem.tools.errors import ToolFailure
from phloem.tools.outputlimit import OutputBudget, OutputPolicy, Report, apply_with_grant
from phloem.tools.workspace import Touch, Workspace, is_unicode

log = get_logger(__name__)

JSON = dict[str, Any]


ToolWarning = RunWarning
"""The warnings tools pass to `ToolContext.on_warning`: the one warning shape."""


class ToolContext:
    """Everything a tool call may use besides its arguments.

    `workspace` confines the coding tools' paths; a context without one serves tools
    that never touch it (`needs_workspace` false, e.g. a `FunctionTool`), and reading
    `ctx.workspace` there fails the call with `no_workspace`. `session` keys the read
    ledger and the output budget; `cancel` aborts the call with `cancelled`; `on_touch`
    and `on_warning` receive touches and walk warnings.
    """

    def __init__(
        self,
        workspace: Workspace | None = None,
        session: str = "default",
        cancel: threading.Event | None = None,
        policy: OutputPolicy | None = None,
        budget: OutputBudget | None = None,
        on_touch: Callable[[Touch], None] | None = None,
        on_warning: Callable[[ToolWarning], None] | None = None,
    ) -> None:
        self._workspace = workspace
        self.session = session
        self.cancel = cancel if cancel is not None else threading.Event()
        self.policy = policy if policy is not None else OutputPolicy()
        self.budget = budget
        self.on_touch = on_touch
        self.on_warning = on_warning

    def with_cancel(self, cancel: threading.Event) -> ToolContext:
        """This context with another `cancel` (a run's own), everything else shared."""
        return ToolContext(
            self._workspace,
            self.session,
            cancel,
            self.policy,
            self.budget,
            self.on_touch,
            self.on_warning,
        )

    @property
    def has_workspace(self) -> bool:
        return self._workspace is not None

    @property
    def workspace(self) -> Workspace:
        if self._workspace is None:
            raise ToolFailure("no_workspace", "this tool call has no workspace")
        return self._workspace

    def __repr__(self) -> str:
        root = self._workspace.root if self._workspace is not None else None
        return f"ToolContext(workspace={root!s}, session={self.session!r})"

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
    """A named operation with an exact JSON input schema; see the module docstring.

    Subclasses set `name`, `description` and `input_schema` (class attributes, or per
    instance as `FunctionTool` does) and implement `call`.
    """

    name: str
    description: str
    input_schema: JSON
    read_only: ClassVar[bool] = False
    """True when the tool never changes the workspace (safe for planning examples)."""
    needs_workspace: ClassVar[bool] = True
    """False when the tool never reads `ctx.workspace`; only such tools run without one."""
    blocking: bool = True
    """False when `run` never waits (no I/O, no lock, no sleep, no long computation): an
    agent run driven as a fiber then calls it on its own hub thread instead of handing
    it to an offload thread and back (two thread hand-offs a call fewer). A tool that
    says False and blocks stalls every run on that hub while it does."""

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
        except Exception as exc:
            return raised(self.name, exc)

    @abstractmethod
    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        """Run with validated arguments (defaults filled); raise `ToolFailure` to fail."""

    def declaration(self) -> FunctionDeclaration:
        """The tool as a model-facing function declaration (name, description, schema);
        a tool without arguments declares no parameters."""
        schema = self.input_schema
        takes_arguments = bool(schema.get("properties")) or (
            schema.get("additionalProperties", True) is not False
        )
        return FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters=copy.deepcopy(schema) if takes_arguments else None,
        )

    def describe(self) -> JSON:
        """Name, description and input schema, as handed to a model (a copy: a caller
        changing it changes no tool)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": copy.deepcopy(self.input_schema),
        }


class FunctionTool(Tool):
    """A plain Python function as a tool: the validated arguments go in as keywords; a
    dict result is returned as is, any other JSON value as `{"result": value}` (unless it
    is a `RawToolResult`: then it is sent verbatim where the protocol can).

    `parameters` is the input schema; without it the schema comes from the function's
    signature (parameters annotated `str`, `int`, `float`, `bool`, `dict` or `list` get
    that JSON type, others take any value; those without a default are required). Either
    way the schema is made exact (`additionalProperties: false`). Arguments the function
    cannot take fail with `arguments`; so does raising `ToolFailure`. It needs no
    workspace.
    """

    needs_workspace = False

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        *,
        blocking: bool = True,
    ) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable")
        self.fn = fn
        self.blocking = blocking
        self.name = name
        self.description = description
        try:
            self._signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self._signature = None
        if parameters is None:
            parameters = _signature_schema(self._signature)
        self.input_schema = _exact(parameters)
        self.declaration()  # refuses a name or schema no model could be given, now

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], *, blocking: bool = True) -> FunctionTool:
        """A tool named after `fn`, described by its docstring, typed by its signature
        (`blocking=False` for a function that never waits: see `Tool.blocking`)."""
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str):
            raise TypeError("a tool function needs a __name__")
        return cls(name, fn, inspect.getdoc(fn) or "", blocking=blocking)

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        if self._signature is not None:
            try:
                self._signature.bind(**args)
            except TypeError as exc:
                raise ToolFailure("arguments", str(exc)) from None
        value = self.fn(**args)
        if isinstance(value, dict):
            return value
        if isinstance(value, RawToolResult):
            # Sent as it is where a protocol can; the agents and one-shot runs check for it.
            return cast(JSON, value)
        return {"result": value}


_JSON_TYPES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def _signature_schema(signature: inspect.Signature | None) -> JSON:
    """An object schema for the keyword parameters of `signature`."""
    properties: JSON = {}
    required: list[str] = []
    for pname, param in signature.parameters.items() if signature is not None else ():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            continue
        ann = param.annotation
        spec: JSON = {}
        if isinstance(ann, type) and ann in _JSON_TYPES:
            spec["type"] = _JSON_TYPES[ann]
        elif isinstance(ann, str):  # postponed annotations (`from __future__ import ...`)
            kind = next((t for t in _JSON_TYPES if t.__name__ == ann), None)
            if kind is not None:
                spec["type"] = _JSON_TYPES[kind]
        properties[pname] = spec
        if param.default is param.empty:
            required.append(pname)
    return object_schema(properties, required)


def _exact(parameters: Mapping[str, Any]) -> JSON:
    if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
        raise ValueError("parameters must be an object schema")
    if parameters.get("additionalProperties", False) is not False:
        raise ValueError("parameters must not allow additional properties")
    return {**parameters, "type": "object", "additionalProperties": False}


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """`value` as a tool: a `Tool` as is, a plain callable as `FunctionTool.from_callable`."""
    if isinstance(value, Tool):
        return value
    if callable(value):
        return FunctionTool.from_callable(value)
    raise TypeError("a tool must be a phloem.tools Tool or a plain callable")


def raised(tool: str, exc: Exception) -> JSON:
    """The failure value `exception` for an unexpected exception in `tool`: logged (type
    and where, never the message), answered with the redacted `Type: message`."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    log.error("tool_raised", tool=tool, error_type=type(exc).__name__, where=where)
    message = redact(text_only(f"{type(exc).__name__}: {exc}"))
    return ToolFailure("exception", message).to_value()


def raised_type(result: Mapping[str, Any]) -> str | None:
    """For the failure value `exception` (a tool raised), the exception's type name ("" when
    the message does not start with one); None for any other result."""
    if not isinstance(result, Mapping) or result.get("error") != "exception":
        return None
    message = result.get("message")
    found = _TYPE_PREFIX.match(message) if isinstance(message, str) else None
    return found.group(1) if found else ""


_TYPE_PREFIX = re.compile(r"([A-Za-z_][A-Za-z0-9_.]{0,99}):")


def text_only(text: str) -> str:
    """`text` with any lone surrogate written as a `\\udcff` escape (UTF-8 safe)."""
    return text if is_unicode(text) else text.encode("utf-8", "backslashreplace").decode()


def unknown_tool(name: str) -> JSON:
    """The failure value for a call of a tool nobody declared (`unknown_tool`)."""
    return ToolFailure("unknown_tool", f"no tool named {name}").to_value()


def is_failure(result: Mapping[str, Any]) -> bool:
    """True for a failure value (it carries an `error` code)."""
    if not isinstance(result, Mapping):
        return False  # a raw result is never a failure value
    return isinstance(result.get("error"), str) and bool(result.get("error"))


# -- argument validation ---------------------------------------------------------------

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def _type_ok(kind: str, value: Any) -> tuple[bool, Any]:
    """Whether `value` has JSON type `kind`, and the value (integral floats become ints)."""
    if kind == "string":
        return isinstance(value, str), value
    if kind == "boolean":
        return isinstance(value, bool), value
    if kind == "integer":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        return isinstance(value, int) and not isinstance(value, bool), value
    if kind == "number":
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and math.isfinite(value), value
    if kind == "array":
        return isinstance(value, list), value
    if kind == "object":
        return isinstance(value, dict), value
    if kind == "null":
        return value is None, value
    raise ValueError(f"unsupported schema type {kind!r}")


def _check_type(name: str, kinds: list[str], value: Any) -> Any:
    """Return `value` (integral floats become ints) or raise for a wrong JSON type."""
    for kind in kinds:
        ok, converted = _type_ok(kind, value)
        if ok:
            return converted
    expected = " or ".join(_TYPE_NAMES.get(kind, kind) for kind in kinds)
    raise ToolFailure("arguments", f"{name} must be {expected}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_value(name: str, spec: Any, value: Any) -> Any:
    if isinstance(value, str) and not is_unicode(value):
        raise ToolFailure("arguments", f"{name} must be Unicode text (it holds a lone surrogate)")
    if not isinstance(spec, Mapping):
        return value  # `true` or a bare schema: any value
    kind = spec.get("type")
    if kind is not None:
        value = _check_type(name, [kind] if isinstance(kind, str) else list(kind), value)
    if "enum" in spec and value not in spec["enum"]:
        choices = ", ".join(str(choice) for choice in spec["enum"])
        raise ToolFailure("arguments", f"{name} must be one of {choices}")
    if _is_number(value) and ("minimum" in spec or "maximum" in spec):
        try:
            check_range(name, value, spec.get("minimum"), spec.get("maximum"), integer=False)
        except RangeError as exc:
            raise ToolFailure("arguments", exc.message) from None
    if isinstance(value, str) and "minLength" in spec and len(value) < spec["minLength"]:
        if spec["minLength"] == 1:
            raise ToolFailure("arguments", f"{name} must not be empty")
        raise ToolFailure("arguments", f"{name} must have at least {spec['minLength']} characters")
    if isinstance(value, str) and "maxLength" in spec and len(value) > spec["maxLength"]:
        raise ToolFailure("arguments", f"{name} must have at most {spec['maxLength']} characters")
    if isinstance(value, list) and "items" in spec:
        return [_check_value(f"{name}[{i}]", spec["items"], item) for i, item in enumerate(value)]
    return value


def validate_arguments(schema: Mapping[str, Any], args: Any) -> JSON:
    """Check `args` against an exact object schema; return a copy with defaults filled in.

    The one argument check of every tool: unknown and missing keys, then per value its
    `type` (a name or a list of names; none means any), `enum`, `minimum`/`maximum`,
    `minLength`/`maxLength` and array `items`; any string must be Unicode text (no lone
    surrogate). Nested object properties are not checked.
    A failure is `ToolFailure("arguments", ...)` naming the parameter.
    """
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
        elif isinstance(spec, Mapping) and "default" in spec:
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
