"""One-shot runs: one bounded, synchronous model invocation with an exact tool list.

`run(...)` sends the instruction and prompt, executes the calls the model asks for
(sequentially in response order by default, or in parallel), feeds the results back and
stops at the first answer without calls. Every bound is required and positive. The run
lives in an ephemeral session that is deleted before `run` returns — also after
cancellation, a model or tool exception, or a limit. The result (text, tool results in
response order, metadata) is always returned; `result.error` says why it stopped early.

Tools follow the one tool contract (`phloem.tools.contract`): `Tool`s (`FunctionTool`, or
coding tools given a `tool_context`) and plain callables. A call's arguments are validated
against the tool's schema first; failure values (`arguments`, `unknown_tool`, the tool's
own codes) go back to the model like any result; a tool that raised (`Tool.run` answers
the failure value `exception`) ends the run with `tool_panic`.

`probe(model)` checks that a model can make a tool call: one non-streaming request forcing
a call of the inert `phloem_ping` tool with a fixed marker. Only a call whose arguments
validate against that tool's schema (exactly the marker) passes; the tool never runs.

Size: one module on purpose — `run` and `probe` share the bounded request/response loop
and the one result shape; its limits are listed once, here.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal

import msgspec

from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.models.cancel import cancel_scope
from phloem.models.interceptors import NO_INTERCEPTORS, CallInfo, Interceptors, ToolCall
from phloem.models.openai import OpenAIModel
from phloem.protocols.content import (
    Content,
    FunctionCall,
    FunctionDeclaration,
    FunctionResponse,
    GenerateConfig,
    ModelRequest,
    ModelResponse,
    Part,
    RawToolResult,
    Usage,
)
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.model import Model, ModelError
from phloem.protocols.openai_chat import INVALID_ARGUMENTS_KEY
from phloem.supervision.owners import carry
from phloem.tools.contract import (
    JSON,
    Tool,
    ToolContext,
    as_tool,
    object_schema,
    raised,
    raised_type,
    unknown_tool,
    validate_arguments,
)
from phloem.tools.errors import ToolFailure
from phloem.tools.registry import ToolRegistry

log = get_logger(__name__)

ToolExecution = Literal["sequential", "parallel"]
MAX_PARALLEL_TOOLS: Final = 16
"""Worker threads for parallel tool execution (fewer when a response has fewer calls)."""
MAX_EPHEMERAL_SESSIONS: Final = 4096
"""Concurrent one-shot runs per session store; one more is refused with `invalid_argument`."""
MAX_EPHEMERAL_SESSIONS_LIMIT: Final = 1_000_000
"""The largest `limit` an `EphemeralSessions` store accepts."""
PROBE_TOOL: Final = "phloem_ping"
PROBE_MARKER: Final = "phloem-probe-7f3a"
DEFAULT_PROBE_MAX_OUTPUT_TOKENS: Final = 64


# The agent name one-shot runs carry in their `CallInfo` (interceptors see it).
ONE_SHOT_AGENT: Final = "oneshot"
ONE_SHOT_KINDS: Final = frozenset(
    {
        ErrorKind.INVALID_ARGUMENT,
        ErrorKind.CANCELLED,
        ErrorKind.MODEL_PANIC,
        ErrorKind.TOOL_PANIC,
        ErrorKind.OUTPUT_TRUNCATED,
        ErrorKind.TEXT_TRUNCATED,
        ErrorKind.MODEL_CALL_LIMIT,
        ErrorKind.TOOL_CALL_LIMIT,
        ErrorKind.TOOL_CALLING_UNSUPPORTED,
        ErrorKind.NO_FINAL_RESPONSE,
        ErrorKind.EXECUTION_FAILED,
        ErrorKind.CLEANUP_FAILED,
    }
)
"""Why a one-shot run or probe did not succeed: every `kind` `result.error` may carry.

These are plasmid's one-shot result codes in the one `ErrorKind` vocabulary. The only
spelling that differs is plasmid's `canceled`, which phloem writes `cancelled` as
everywhere else: a `OneShotResult` is phloem's own value (it is never exchanged with
plasmid, and no conformance fixture covers it), so no translation table is kept."""


class _PingTool(Tool):
    """The probe's inert tool: declared to the model, never run."""

    name = PROBE_TOOL
    description = "Inert connectivity check; does nothing."
    input_schema = object_schema({"marker": {"type": "string", "enum": [PROBE_MARKER]}}, ["marker"])
    needs_workspace = False

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        return {}


_PING: Final = _PingTool()


def _conforms(tool: Tool, args: Any) -> bool:
    try:
        validate_arguments(tool.input_schema, args)
    except ToolFailure:
        return False
    return True


class OneShotMetadata(msgspec.Struct, frozen=True):
    model_calls: int = 0
    tool_calls: int = 0
    usage: Usage = msgspec.field(default_factory=Usage)


class OneShotResult(msgspec.Struct, frozen=True):
    """What a run produced — also when it failed (`error` is then set)."""

    text: str = ""
    tool_results: tuple[FunctionResponse, ...] = ()
    metadata: OneShotMetadata = msgspec.field(default_factory=OneShotMetadata)
    error: ErrorValue | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> OneShotResult:
        """Return self, or raise the error as a `PhloemError`."""
        if self.error is not None:
            raise PhloemError.from_value(self.error)
        return self


class EphemeralSessions:
    """Bounded in-memory store of the sessions of running one-shot calls."""

    def __init__(self, limit: int = MAX_EPHEMERAL_SESSIONS) -> None:
        self.limit = check_range("limit", limit, 1, MAX_EPHEMERAL_SESSIONS_LIMIT)
        self._lock = threading.Lock()
        self._sessions: dict[str, list[Content]] = {}
        self._ids = itertools.count(1)

    def create(self) -> str:
        with self._lock:
            if len(self._sessions) >= self.limit:
                raise PhloemError(
                    ErrorKind.INVALID_ARGUMENT,
                    f"too many concurrent one-shot runs (limit {self.limit})",
                )
            session_id = f"oneshot-{next(self._ids)}"
            self._sessions[session_id] = []
            return session_id

    def append(self, session_id: str, content: Content) -> None:
        with self._lock:
            self._sessions[session_id].append(content)

    def contents(self, session_id: str) -> tuple[Content, ...]:
        with self._lock:
            return tuple(self._sessions[session_id])

    def delete(self, session_id: str) -> None:
        with self._lock:
            del self._sessions[session_id]

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


DEFAULT_SESSIONS: Final = EphemeralSessions()


class _Stop(Exception):
    """Ends a run with a code; the result so far is kept."""

    def __init__(self, code: ErrorKind, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.error = ErrorValue(kind=code, message=message, details=details)


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Stop(ErrorKind.INVALID_ARGUMENT, f"{name} must be a positive integer")


def _bounded_text(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True


class _Run:
    def __init__(
        self,
        model: Model,
        tools: ToolRegistry,
        tool_context: ToolContext,
        max_returned_text_bytes: int,
        tool_execution: ToolExecution,
        cancel: threading.Event | None,
        recover_arguments: bool,
        interceptors: Interceptors = NO_INTERCEPTORS,
    ) -> None:
        self.model = model
        self.interceptors = interceptors
        self.info = CallInfo(kind="agent", agent=ONE_SHOT_AGENT, target="oneshot")
        self.tools = tools
        self.tool_context = tool_context
        self.max_text = max_returned_text_bytes
        self.parallel = tool_execution == "parallel"
        self.cancel = cancel
        self.recover = recover_arguments
        self.text = ""
        self.tool_results: list[FunctionResponse] = []
        self.model_calls = 0
        self.started = time.monotonic()
        self.tool_calls = 0
        self.usage = Usage()

    def is_cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise _Stop(ErrorKind.CANCELLED, "the one-shot run was cancelled")

    def call_model(self, request: ModelRequest) -> ModelResponse:
        self.check_cancel()
        self.model_calls += 1
        try:
            info = self.info.for_model(self.model)
            with cancel_scope(self.is_cancelled):
                response = self.interceptors.model(info, request, self._generate)
        except ModelError as exc:
            if self.is_cancelled():
                raise _Stop(ErrorKind.CANCELLED, "the one-shot run was cancelled") from None
            code = (
                ErrorKind.TOOL_CALLING_UNSUPPORTED
                if exc.kind == ErrorKind.UNSUPPORTED_TOOL_CALL
                else ErrorKind.EXECUTION_FAILED
            )
            raise _Stop(
                code, f"model call failed: {exc.kind}: {exc.message}", {"model_error": exc.kind}
            ) from None
        except PhloemError as exc:  # an interceptor stopped the run (a plugin's halt, ...)
            raise _Stop(ErrorKind(exc.kind), exc.message) from None
        except Exception as exc:
            log.warning("oneshot_model_panic", error_type=type(exc).__name__)
            raise _Stop(ErrorKind.MODEL_PANIC, f"the model raised {type(exc).__name__}") from None
        if response.usage is not None:
            self.usage = self.usage + response.usage
        self.check_cancel()
        return response

    def _generate(self, request: ModelRequest) -> ModelResponse:
        if self.recover and isinstance(self.model, OpenAIModel):
            return self.model.generate(request, recover_arguments=True)
        return self.model.generate(request)

    def set_text(self, text: str) -> bool:
        self.text, truncated = _bounded_text(text, self.max_text)
        return truncated

    def run_tool(self, call: FunctionCall) -> tuple[Part, FunctionResponse | None]:
        """Run one call; returns the part for the model and the completed tool result."""
        if INVALID_ARGUMENTS_KEY in call.args:
            reason = str(call.args[INVALID_ARGUMENTS_KEY])
            failure = ToolFailure("arguments", f"invalid tool arguments: {reason}")
            return Part.from_function_response(call.name, failure.to_value(), id=call.id), None
        tool = self.tools.get(call.name)
        if tool is None:
            answer = unknown_tool(call.name)
            return Part.from_function_response(call.name, answer, id=call.id), None
        self.check_cancel()

        def run(request: ToolCall) -> JSON:
            try:
                return tool.run(dict(request.args), self.tool_context)
            except Exception as exc:  # a Tool that overrides run() and lets one out
                return raised(call.name, exc)

        request = ToolCall(call.name, call.args, call.id)
        try:
            result = self.interceptors.tool(self.info.derive("tool", call.name), request, run)
        except PhloemError as exc:  # an interceptor stopped the run
            raise _Stop(ErrorKind(exc.kind), exc.message) from None
        error_type = raised_type(result)
        if error_type is not None:
            log.warning("oneshot_tool_panic", tool=call.name, error_type=error_type)
            what = f" {error_type}" if error_type else ""
            raise _Stop(ErrorKind.TOOL_PANIC, f"tool {call.name!r} raised{what}")
        if isinstance(result, RawToolResult):  # prevalidated JSON, sent verbatim by Chat
            response = FunctionResponse(name=call.name, id=call.id, raw=result.json)
            return Part(function_response=response), response
        try:
            msgspec.json.encode(result)
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
            raise _Stop(
                ErrorKind.EXECUTION_FAILED, f"tool {call.name!r} returned a non-JSON value"
            ) from None
        response = FunctionResponse(name=call.name, response=result, id=call.id)
        return Part(function_response=response), response

    def run_tools(self, calls: Sequence[FunctionCall]) -> list[Part]:
        if not self.parallel or len(calls) == 1:
            outcomes = [self.run_tool(c) for c in calls]
        else:
            run_tool = carry(self.run_tool)  # a command a tool starts is the run's child
            with ThreadPoolExecutor(max_workers=min(len(calls), MAX_PARALLEL_TOOLS)) as pool:
                futures = [pool.submit(run_tool, c) for c in calls]
                outcomes = []
                first_stop: _Stop | None = None
                for future in futures:  # response order, whatever the finishing order
                    try:
                        outcomes.append(future.result())
                    except _Stop as stop:
                        first_stop = first_stop or stop
                if first_stop is not None:
                    self.record(outcomes)
                    raise first_stop
        self.record(outcomes)
        return [part for part, _ in outcomes]

    def record(self, outcomes: list[tuple[Part, FunctionResponse | None]]) -> None:
        for _, result in outcomes:
            if result is not None:
                self.tool_results.append(result)
                self.tool_calls += 1

    def result(self, error: ErrorValue | None) -> OneShotResult:
        outcome = str(error.kind) if error else "ok"
        telemetry.count("phloem.runs", kind="oneshot", outcome=outcome)
        elapsed = time.monotonic() - self.started
        telemetry.record("phloem.run.duration", elapsed, kind="oneshot", outcome=outcome)
        return OneShotResult(
            text=self.text,
            tool_results=tuple(self.tool_results),
            metadata=OneShotMetadata(
                model_calls=self.model_calls, tool_calls=self.tool_calls, usage=self.usage
            ),
            error=error,
        )


def _wants_recovery(model: Model) -> bool:
    """The OpenAI Chat adapter can hand back unparsable arguments as marked calls, so the
    model is told and may retry, instead of the whole response failing."""
    return isinstance(model, OpenAIModel) and model.protocol == "chat_completions"


def _registry(
    tools: Sequence[Tool | Callable[..., Any]], tool_context: ToolContext | None
) -> ToolRegistry:
    """The run's exact tool list by name; anything unusable is `invalid_argument`."""
    registry = ToolRegistry()
    for i, value in enumerate(tools):
        try:
            tool = as_tool(value)
        except (TypeError, ValueError) as exc:
            raise _Stop(ErrorKind.INVALID_ARGUMENT, f"tools[{i}]: {exc}") from None
        if tool.needs_workspace and tool_context is None:
            raise _Stop(
                ErrorKind.INVALID_ARGUMENT,
                f"tool {tool.name!r} needs tool_context (its workspace)",
            )
        if tool.name in registry:
            raise _Stop(ErrorKind.INVALID_ARGUMENT, f"tools has two tools named {tool.name!r}")
        try:
            tool.declaration()
            registry.register(tool)
        except ValueError as exc:
            raise _Stop(ErrorKind.INVALID_ARGUMENT, f"tools[{i}]: {exc}") from None
    return registry


def run(
    model: Model,
    instruction: str,
    prompt: str,
    tools: Sequence[Tool | Callable[..., Any]],
    *,
    max_output_tokens: int,
    max_returned_text_bytes: int,
    max_model_calls: int,
    max_tool_calls_per_response: int,
    tool_execution: ToolExecution = "sequential",
    cancel: threading.Event | None = None,
    sessions: EphemeralSessions = DEFAULT_SESSIONS,
    tool_context: ToolContext | None = None,
    interceptors: Interceptors = NO_INTERCEPTORS,
) -> OneShotResult:
    """Run one bounded invocation; see the module docstring. Never raises for a failed
    run: the result's `error` carries the kind (one of `ONE_SHOT_KINDS`). Tools run in
    `tool_context` (required by tools that need a workspace), else in a context without
    a workspace whose `cancel` is the run's. Every model and tool call goes through
    `interceptors` (`phloem.models.interceptors`)."""
    if tool_context is None:
        ctx = ToolContext(cancel=cancel)
    else:  # the run's cancel also stops its tools (a running bash is stopped)
        ctx = tool_context if cancel is None else tool_context.with_cancel(cancel)
    state = _Run(model, ToolRegistry(), ctx, 1, "sequential", cancel, recover_arguments=False)
    try:
        if not callable(getattr(model, "generate", None)):
            raise _Stop(ErrorKind.INVALID_ARGUMENT, "model must have a generate method")
        if not isinstance(instruction, str) or not isinstance(prompt, str):
            raise _Stop(ErrorKind.INVALID_ARGUMENT, "instruction and prompt must be strings")
        if not prompt:
            raise _Stop(ErrorKind.INVALID_ARGUMENT, "prompt must not be empty")
        _positive("max_output_tokens", max_output_tokens)
        _positive("max_returned_text_bytes", max_returned_text_bytes)
        _positive("max_model_calls", max_model_calls)
        _positive("max_tool_calls_per_response", max_tool_calls_per_response)
        if tool_execution not in ("sequential", "parallel"):
            raise _Stop(ErrorKind.INVALID_ARGUMENT, "tool_execution must be sequential or parallel")
        registry = _registry(tools, tool_context)
    except _Stop as stop:
        return state.result(stop.error)
    state = _Run(
        model,
        registry,
        ctx,
        max_returned_text_bytes,
        tool_execution,
        cancel,
        recover_arguments=_wants_recovery(model),
        interceptors=interceptors,
    )
    declarations = registry.declarations()
    config = GenerateConfig(max_output_tokens=max_output_tokens)
    try:
        session_id = sessions.create()
    except PhloemError as exc:
        return state.result(ErrorValue(kind=exc.kind, message=exc.message))
    error: ErrorValue | None = None
    try:
        sessions.append(session_id, Content.user(prompt))
        error = _loop(
            state,
            sessions,
            session_id,
            instruction,
            declarations,
            config,
            max_model_calls,
            max_tool_calls_per_response,
        )
    finally:
        try:
            sessions.delete(session_id)
        except Exception as exc:
            log.error("oneshot_cleanup_failed", error_type=type(exc).__name__)
            if error is None:
                error = ErrorValue(
                    kind=ErrorKind.CLEANUP_FAILED,
                    message=f"deleting the ephemeral session failed: {type(exc).__name__}",
                )
    return state.result(error)


def _loop(
    state: _Run,
    sessions: EphemeralSessions,
    session_id: str,
    instruction: str,
    declarations: tuple[FunctionDeclaration, ...],
    config: GenerateConfig,
    max_model_calls: int,
    max_tool_calls_per_response: int,
) -> ErrorValue | None:
    try:
        for _ in range(max_model_calls):
            request = ModelRequest(
                contents=sessions.contents(session_id),
                system_instruction=instruction or None,
                tools=declarations,
                config=config,
            )
            response = state.call_model(request)
            calls = response.function_calls
            truncated = state.set_text(response.text)
            if response.finish_reason == "MAX_TOKENS":
                raise _Stop(ErrorKind.OUTPUT_TRUNCATED, "the model's output was truncated")
            if not calls:
                if response.content is None or not response.content.parts:
                    raise _Stop(ErrorKind.NO_FINAL_RESPONSE, "the model returned no final response")
                if truncated:
                    raise _Stop(
                        ErrorKind.TEXT_TRUNCATED,
                        f"final text exceeded max_returned_text_bytes "
                        f"({state.max_text} bytes) and was cut",
                    )
                return None
            if len(calls) > max_tool_calls_per_response:
                raise _Stop(
                    ErrorKind.TOOL_CALL_LIMIT,
                    f"the model asked for {len(calls)} tool calls; "
                    f"max_tool_calls_per_response is {max_tool_calls_per_response}",
                )
            sessions.append(session_id, response.content or Content(role="model"))
            answers = state.run_tools(calls)
            sessions.append(session_id, Content(role="user", parts=tuple(answers)))
        raise _Stop(
            ErrorKind.MODEL_CALL_LIMIT,
            f"the model was still calling tools after max_model_calls ({max_model_calls})",
        )
    except _Stop as stop:
        return stop.error


def probe(
    model: Model,
    max_output_tokens: int = DEFAULT_PROBE_MAX_OUTPUT_TOKENS,
    *,
    cancel: threading.Event | None = None,
) -> OneShotResult:
    """Check tool calling with one forced call of the inert ping tool; see the module
    docstring. No session is created and no tool runs."""
    state = _Run(
        model, ToolRegistry(), ToolContext(), 1 << 20, "sequential", cancel, recover_arguments=False
    )
    try:
        if not callable(getattr(model, "generate", None)):
            raise _Stop(ErrorKind.INVALID_ARGUMENT, "model must have a generate method")
        _positive("max_output_tokens", max_output_tokens)
        request = ModelRequest(
            contents=(
                Content.user(
                    f"Call the {PROBE_TOOL} tool exactly once with marker "
                    f'"{PROBE_MARKER}". Do not answer with text.'
                ),
            ),
            system_instruction="You are checking that tool calling works.",
            tools=(_PING.declaration(),),
            config=GenerateConfig(max_output_tokens=max_output_tokens, forced_function=PROBE_TOOL),
        )
        response = state.call_model(request)
        state.set_text(response.text)
        calls = response.function_calls
        if response.finish_reason == "MAX_TOKENS":
            raise _Stop(ErrorKind.OUTPUT_TRUNCATED, "the probe answer was truncated")
        if not calls and not response.text:
            raise _Stop(ErrorKind.NO_FINAL_RESPONSE, "the model returned nothing")
        if len(calls) != 1:
            raise _Stop(
                ErrorKind.TOOL_CALLING_UNSUPPORTED,
                f"expected exactly one {PROBE_TOOL} call, got {len(calls)} calls",
            )
        call = calls[0]
        if call.name != PROBE_TOOL or not _conforms(_PING, call.args):
            raise _Stop(
                ErrorKind.TOOL_CALLING_UNSUPPORTED,
                f"the model's call did not match the {PROBE_TOOL} contract",
            )
    except _Stop as stop:
        return state.result(stop.error)
    return state.result(None)
