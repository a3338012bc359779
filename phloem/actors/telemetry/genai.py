"""`GenAIInterceptor`: spans and metrics for every agent, model and tool call.

Installed outermost in the tree's interceptor chain by the telemetry service, so every
agent invocation (sub-agents included), model call and tool call of every run — and of
one-shot runs — is one span, named and attributed by the OpenTelemetry GenAI semantic
conventions (the version is `providers.SEMCONV_VERSION`):

- `invoke_agent {agent}`: `gen_ai.operation.name`, `gen_ai.agent.name`,
  `gen_ai.conversation.id` (the session), `phloem.invocation.id`; `error.type` when the
  agent ended with an error event or raised.
- `chat {model}` / `generate_content {model}`: `gen_ai.provider.name`,
  `gen_ai.request.model`, `gen_ai.output.type` (`text`: phloem asks every model for
  text — structured answers are text it parses), `gen_ai.response.model`, `gen_ai.response.id`,
  `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens` / `output_tokens`,
  `gen_ai.usage.cache_read.input_tokens` and `gen_ai.usage.reasoning_tokens` when the
  provider says them, `error.type`. It is the current span while the request is sent, so
  the provider's HTTP request carries its `traceparent`. Each call also records
  `gen_ai.client.operation.duration` and `gen_ai.client.token.usage` (by
  `gen_ai.token.type`).
- `execute_tool {tool}`: `gen_ai.tool.name`, `gen_ai.tool.call.id`; `error.type` is the
  tool contract's failure code when the answer is a failure value.

Content — messages, system instructions, tool arguments and results — is recorded only
with `capture_content = true`: then as JSON, secret-pruned and redacted with the one
secret rule (`redact_value`), cut to `max_content_chars`, and the span carries
`phloem.content_captured = true`. Credentials never reach a span: `CallInfo` has none.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import msgspec
from opentelemetry import trace

from phloem.base import telemetry
from phloem.models.interceptors import JSON, CallInfo, Interceptor, ToolCall
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.secrets import redact_value

T = TypeVar("T")

CONTENT_FLAG = "phloem.content_captured"


OUTPUT_TYPE = "text"  # the output type phloem requests of every model call


class GenAIInterceptor(Interceptor):
    """Spans (and the GenAI client metrics) around agent, model and tool calls."""

    name = "telemetry"

    def __init__(self, *, capture_content: bool = False, max_content_chars: int = 4096) -> None:
        self.capture_content = capture_content
        self.max_content_chars = max_content_chars

    # -- content ---------------------------------------------------------------------------

    def _content(self, value: Any) -> str:
        """`value` as bounded, secret-free JSON text."""
        limit = self.max_content_chars
        cleaned = redact_value(value, limit=limit)
        text = json.dumps(cleaned, ensure_ascii=False, default=str, separators=(",", ":"))
        return text if len(text) <= limit else text[: limit - 1] + "…"

    # -- agents ------------------------------------------------------------------------------

    def agent_call(self, info: CallInfo, proceed: Callable[[], Iterator[T]]) -> Iterator[T]:
        sp = telemetry.start_span(
            f"invoke_agent {info.agent}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": info.agent,
                "gen_ai.conversation.id": info.session_id or None,
                "phloem.invocation.id": info.invocation_id,
                "phloem.agent.class": info.target,
            },
        )
        if sp is None:
            return proceed()
        return self._agent_events(info, sp, proceed)

    def _agent_events(
        self, info: CallInfo, sp: trace.Span, proceed: Callable[[], Iterator[T]]
    ) -> Iterator[T]:
        ctx = trace.set_span_in_context(sp)
        error: str | None = None
        started = time.monotonic()
        try:
            with telemetry.use(ctx):
                events = proceed()
            while True:
                with telemetry.use(ctx):
                    try:
                        event = next(events)
                    except StopIteration as stop:
                        return stop.value  # type: ignore[no-any-return]
                failure = getattr(event, "error", None)
                if failure is not None and getattr(event, "author", None) == info.agent:
                    error = str(getattr(failure, "kind", "error"))
                yield event
        except GeneratorExit:
            error = error or "abandoned"
            raise
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            telemetry.record(
                "gen_ai.client.operation.duration",
                time.monotonic() - started,
                **{"gen_ai.operation.name": "invoke_agent", "error.type": error},
            )
            telemetry.end_span(sp, error)

    # -- models ------------------------------------------------------------------------------

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        meta = info.metadata
        operation = meta.get("gen_ai.operation.name", "chat")
        model = meta.get("gen_ai.request.model", "") or info.target
        provider = meta.get("gen_ai.provider.name", "") or info.target
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.agent.name": info.agent,
            "gen_ai.output.type": OUTPUT_TYPE,
        }
        config = request.config
        for key, attr in (
            ("temperature", "gen_ai.request.temperature"),
            ("max_output_tokens", "gen_ai.request.max_tokens"),
            ("top_p", "gen_ai.request.top_p"),
        ):
            value = getattr(config, key, None)
            if isinstance(value, int | float):
                attrs[attr] = value
        sp = telemetry.start_span(f"{operation} {model}", attrs, kind=trace.SpanKind.CLIENT)
        if sp is None:
            return proceed(request)
        if self.capture_content:
            self._request_content(sp, request)
        metric_attrs = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
        }
        started = time.monotonic()
        error: str | None = None
        try:
            with telemetry.use(trace.set_span_in_context(sp)):
                response = proceed(request)
        except BaseException as exc:
            error = str(getattr(exc, "kind", "") or type(exc).__name__)
            raise
        else:
            self._response_attributes(sp, response, metric_attrs)
            return response
        finally:
            telemetry.record(
                "gen_ai.client.operation.duration",
                time.monotonic() - started,
                **metric_attrs,
                **({"error.type": error} if error else {}),
            )
            telemetry.end_span(sp, error)

    def _request_content(self, sp: trace.Span, request: ModelRequest) -> None:
        messages = msgspec.to_builtins(request.contents)
        sp.set_attribute("gen_ai.input.messages", self._content(messages))
        if request.system_instruction:
            sp.set_attribute(
                "gen_ai.system_instructions", self._content(request.system_instruction)
            )
        sp.set_attribute(CONTENT_FLAG, True)

    def _response_attributes(
        self, sp: trace.Span, response: ModelResponse, metric_attrs: Mapping[str, Any]
    ) -> None:
        attrs: dict[str, Any] = {}
        if response.model_version:
            attrs["gen_ai.response.model"] = response.model_version
        if response.response_id:
            attrs["gen_ai.response.id"] = response.response_id
        if response.finish_reason:
            attrs["gen_ai.response.finish_reasons"] = [str(response.finish_reason).lower()]
        usage = response.usage
        if usage is not None:
            attrs["gen_ai.usage.input_tokens"] = usage.input_tokens
            attrs["gen_ai.usage.output_tokens"] = usage.output_tokens
            if usage.cached_tokens:
                attrs["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
            if usage.thoughts_tokens:
                attrs["gen_ai.usage.reasoning_tokens"] = usage.thoughts_tokens
            base = dict(metric_attrs)
            if response.model_version:
                base["gen_ai.response.model"] = response.model_version
            telemetry.record("gen_ai.client.token.usage", usage.input_tokens,
                             **base, **{"gen_ai.token.type": "input"})  # fmt: skip
            telemetry.record("gen_ai.client.token.usage", usage.output_tokens,
                             **base, **{"gen_ai.token.type": "output"})  # fmt: skip
        sp.set_attributes({k: telemetry.bounded(v) for k, v in attrs.items()})
        if self.capture_content and response.content is not None:
            output = self._content(msgspec.to_builtins(response.content))
            sp.set_attribute("gen_ai.output.messages", output)

    # -- tools -------------------------------------------------------------------------------

    def tool_call(
        self, info: CallInfo, call: ToolCall, proceed: Callable[[ToolCall], JSON]
    ) -> JSON:
        sp = telemetry.start_span(
            f"execute_tool {call.name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
                "gen_ai.agent.name": info.agent,
            },
        )
        if sp is None:
            return proceed(call)
        if self.capture_content:
            sp.set_attribute("gen_ai.tool.call.arguments", self._content(dict(call.args)))
            sp.set_attribute(CONTENT_FLAG, True)
        error: str | None = None
        try:
            with telemetry.use(trace.set_span_in_context(sp)):
                result = proceed(call)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        else:
            if isinstance(result, Mapping) and isinstance(result.get("error"), str):
                error = result["error"]
            if self.capture_content:
                sp.set_attribute("gen_ai.tool.call.result", self._content(result))
            return result
        finally:
            telemetry.end_span(sp, error)
