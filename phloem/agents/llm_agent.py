"""`LlmAgent`: a model with an instruction, optional tools and an output key.

Each turn is one model call. The request holds the instruction (templated from state),
the original user message, earlier events of other authors as context, and this
agent's own turns; the declared tools go with it. Function calls in an answer are
executed, their responses added, and the model is called again — at most
`max_tool_rounds` times. The final text is yielded as an event and written to
`output_key`. A failed model call ends the agent with a `model_failed` error event.

`generate_config` (a `GenerateConfig`: max output tokens, temperature, top_p, thinking
config) goes with every model request of the agent, as the seed's agent spec carries it.

A request planner (`BuiltInPlanner`, `PlanReActPlanner` from
`phloem.models.request_planners`) shapes each request and answer when given.

Local callbacks (ADK-style, answering with `phloem.plugins` outcomes): `before_model_callback`
/ `after_model_callback` and `before_tool_callback` / `after_tool_callback` run after the
tree's global plugins (the before ones inside the interceptor chain, the after ones once
the chain's after-hooks are done); a plugin's or a callback's `Halt` ends the agent with
`plugin_halted` and cancels the run.

Tools follow the one tool contract (`phloem.tools.contract`): `Tool`s — the coding tools
need a `tool_context` naming their workspace — and plain callables, which become
`FunctionTool`s (their name, docstring and annotated parameters are the declaration).
Arguments are validated alike, and every answer is the tool's result or a failure value
`{"error": code, "message": ...}`: `arguments`, the tool's own codes, `unknown_tool`,
`too_large` (over `MAX_TOOL_RESULT_BYTES`) or `exception` (the tool raised; the message
is redacted). A tool may answer a `RawToolResult` (any JSON value, sent verbatim by the
OpenAI Chat protocol; the other protocols and the durable store refuse it). The
`exit_loop` tool lets the model end an enclosing `LoopPlanner`: its
answer event escalates. `toolsets` (e.g. configured MCP servers) add tools known only at
run time: they are asked at the start of each run, after the agent's own tools.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from phloem.agents.agent import Agent, call_info
from phloem.agents.context import CancelToken, InvocationContext
from phloem.agents.events import Event, EventActions
from phloem.agents.hooks import (
    STOP_KINDS,
    LocalCallback,
    ToolResult,
    after_returned,
    apply_local,
    as_request,
    as_response,
    as_tool_call,
    mark_after_returned,
    tool_answer,
)
from phloem.agents.templating import render
from phloem.models.cancel import Subscribe, cancel_scope
from phloem.models.interceptors import CallInfo, ToolCall
from phloem.models.request_planners import RequestPlanner
from phloem.models.waiting import call_model
from phloem.protocols.content import (
    Content,
    FunctionCall,
    FunctionDeclaration,
    GenerateConfig,
    ModelRequest,
    ModelResponse,
    Part,
    RawToolResult,
)
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.protocols.limits import check_range
from phloem.protocols.model import Model
from phloem.protocols.secrets import redact
from phloem.supervision import fibers
from phloem.supervision.handle import Flag
from phloem.tools.contract import JSON, Tool, ToolContext, as_tool, object_schema, unknown_tool
from phloem.tools.errors import ToolFailure
from phloem.tools.registry import ToolRegistry
from phloem.tools.toolset import Toolset

DEFAULT_MAX_TOOL_ROUNDS = 10
MAX_TOOL_ROUNDS_RANGE = (1, 100)
MAX_CONTEXT_EVENTS = 50
MAX_TOOL_RESULT_BYTES = 1024 * 1024
MAX_OUTPUT_TOKENS = 1_000_000  # the upper bound `max_output_tokens` may be set to


class ExitLoopTool(Tool):
    """`exit_loop`: the model calls it to end an enclosing `LoopPlanner` (escalation)."""

    name = "exit_loop"
    description = "Call this when the work is complete and the loop should stop."
    input_schema = object_schema({}, [])
    needs_workspace = False
    read_only = True  # changes nothing: never asks for confirmation
    blocking = False  # answers at once: runs in its run's fiber

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        return {"status": "loop exit requested"}


exit_loop = ExitLoopTool()


def _subscriber(token: CancelToken) -> Subscribe:
    """The cancel scope's `subscribe` for a run's `CancelToken`."""

    def subscribe(callback: Callable[[], None]) -> Callable[[], None]:
        token.on_cancel(callback)
        return lambda: token.remove(callback)

    return subscribe


class LlmAgent(Agent):
    fiber_safe = True  # it blocks only in `call_model` and `fibers.offload` (tools)

    def __init__(
        self,
        name: str,
        description: str,
        model: Model,
        instruction: str = "",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        output_key: str | None = None,
        *,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        max_output_tokens: int | None = None,
        generate_config: GenerateConfig | None = None,
        planner: RequestPlanner | None = None,
        tool_context: ToolContext | None = None,
        toolsets: Sequence[Toolset] = (),
        before_model_callback: LocalCallback | None = None,
        after_model_callback: LocalCallback | None = None,
        before_tool_callback: LocalCallback | None = None,
        after_tool_callback: LocalCallback | None = None,
        before_agent_callback: LocalCallback | None = None,
        after_agent_callback: LocalCallback | None = None,
    ) -> None:
        super().__init__(
            name,
            description,
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )
        self.before_model_callback = before_model_callback
        self.after_model_callback = after_model_callback
        self.before_tool_callback = before_tool_callback
        self.after_tool_callback = after_tool_callback
        if not callable(getattr(model, "generate", None)):
            raise TypeError("model must have a generate(request) method")
        check_range("max_tool_rounds", max_tool_rounds, *MAX_TOOL_ROUNDS_RANGE)
        self.model = model
        self.instruction = instruction
        self.tools = tuple(as_tool(t) for t in tools)
        for tool in self.tools:
            if tool.needs_workspace and tool_context is None:
                raise TypeError(f"tool {tool.name!r} needs tool_context (its workspace)")
        self.tool_context = tool_context if tool_context is not None else ToolContext()
        self._registry = ToolRegistry(self.tools)
        self._declarations = self._registry.declarations()
        self.toolsets = tuple(toolsets)
        self.output_key = output_key
        self.max_tool_rounds = max_tool_rounds
        if max_output_tokens is not None:
            check_range("max_output_tokens", max_output_tokens, 1, MAX_OUTPUT_TOKENS)
        if generate_config is not None and not isinstance(generate_config, GenerateConfig):
            raise TypeError("generate_config must be a GenerateConfig")
        config = generate_config or GenerateConfig()
        if max_output_tokens is not None:
            config = msgspec.structs.replace(config, max_output_tokens=max_output_tokens)
        # Sent with every model request of the agent (max output tokens, temperature,
        # thinking config, ...); `max_output_tokens` given on its own wins over its field.
        self.generate_config = config
        if planner is not None and not isinstance(planner, RequestPlanner):
            raise TypeError("planner must be a RequestPlanner (BuiltInPlanner, PlanReActPlanner)")
        self.planner = planner

    def generate(self, request: ModelRequest) -> ModelResponse:
        """One model call (the innermost step of the interceptor chain); in a fiber it
        is waited on parked (`phloem.models.waiting`)."""
        return call_model(self.model, request)

    def history(self, ctx: InvocationContext) -> list[Content]:
        contents: list[Content] = []
        if ctx.user_content is not None:
            contents.append(ctx.user_content)
        for event in ctx.events[-MAX_CONTEXT_EVENTS:]:
            if event.author in (self.name, "user") or not event.text:
                continue
            contents.append(Content.user(f"For context: [{event.author}] said: {event.text}"))
        return contents

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        # The run's cancellation reaches the tools (a running bash is stopped) and the
        # model call in flight (its HTTP request is abandoned), not only the next step.
        cancel = Flag()  # an Event with no Condition until a tool waits on it
        ctx.cancel.on_cancel(cancel.set)
        try:
            yield from self._turns(ctx, self.tool_context.with_cancel(cancel))
        finally:
            ctx.cancel.remove(cancel.set)

    def _turns(self, ctx: InvocationContext, tool_context: ToolContext) -> Iterator[Event]:
        try:
            system = render(self.instruction, ctx.state) if self.instruction else None
        except PhloemError as exc:
            yield self.error_event(ctx, exc.kind, f"{self.name}: {exc.message}")
            return
        contents = self.history(ctx)
        registry, declarations = self._tools_now()
        info = call_info(self, ctx)
        model_info = info.for_model(self.model)
        for _ in range(self.max_tool_rounds + 1):
            if ctx.cancelled:
                return
            request = ModelRequest(
                contents=tuple(contents),
                system_instruction=system,
                tools=declarations,
                config=self.generate_config,
            )
            if self.planner is not None:
                request = self.planner.build_request(request)
            try:
                with cancel_scope(lambda: ctx.cancel.cancelled, _subscriber(ctx.cancel)):
                    response = self._model_call(ctx, model_info, request)
                ctx.usage.add(response.usage)
                if self.planner is not None:
                    response = self.planner.process_response(response)
            except PhloemError as exc:
                if ctx.cancelled and exc.kind not in STOP_KINDS:
                    return  # the run's outcome says cancelled; no model_failed
                if exc.kind in STOP_KINDS:  # a plugin or callback stops the whole run
                    ctx.cancel.cancel(exc.message, exc.to_value())
                elif ctx.cancelled:  # the run's outcome says cancelled; no model_failed
                    return
                kind = exc.kind if exc.kind in STOP_KINDS else ErrorKind.MODEL_FAILED
                yield self.error_event(ctx, kind, f"{self.name}: {exc}")
                return
            except Exception as exc:
                if ctx.cancelled:  # the run's outcome says cancelled; no model_failed
                    return
                yield self.error_event(ctx, "model_failed", f"{self.name}: {exc}")
                return
            reply = response.content or Content(role="model")
            calls = response.function_calls
            if not calls:
                text = response.text
                delta = {self.output_key: text} if self.output_key is not None else {}
                yield Event(
                    author=self.name,
                    invocation_id=ctx.invocation_id,
                    content=reply,
                    actions=EventActions(state_delta=delta),
                )
                return
            yield Event(author=self.name, invocation_id=ctx.invocation_id, content=reply)
            contents.append(reply)
            try:
                parts = tuple(self._call(c, ctx, info, registry, tool_context) for c in calls)
            except PhloemError as exc:
                if exc.kind not in STOP_KINDS:
                    raise
                ctx.cancel.cancel(exc.message, exc.to_value())
                yield self.error_event(ctx, exc.kind, f"{self.name}: {exc.message}")
                return
            answers = Content(role="user", parts=parts)
            escalate = any(isinstance(registry.get(c.name), ExitLoopTool) for c in calls)
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=answers,
                actions=EventActions(escalate=escalate),
            )
            contents.append(answers)
        yield self.error_event(
            ctx,
            "tool_round_limit",
            f"{self.name}: still calling tools after max_tool_rounds ({self.max_tool_rounds})",
        )

    def _tools_now(self) -> tuple[ToolRegistry, tuple[FunctionDeclaration, ...]]:
        """The agent's tools plus its toolsets' tools of this moment (a name already
        taken keeps its first tool)."""
        if not self.toolsets:
            return self._registry, self._declarations
        tools = list(self.tools)
        seen = {tool.name for tool in tools}
        for toolset in self.toolsets:
            for tool in toolset.tools():
                if tool.name not in seen:
                    seen.add(tool.name)
                    tools.append(tool)
        registry = ToolRegistry(tools)
        return registry, registry.declarations()

    def _model_call(
        self, ctx: InvocationContext, info: CallInfo, request: ModelRequest
    ) -> ModelResponse:
        """One model call: the chain (global plugins), then the local callbacks around it."""
        if self.before_model_callback is None and self.after_model_callback is None:
            return ctx.interceptors.model(info, request, self.generate)

        def generate(request: ModelRequest) -> ModelResponse:
            returned, value = apply_local(self.before_model_callback, "before_model", info, request)
            if returned:
                return as_response(value)
            return self.generate(as_request(value))

        mark_after_returned(False)
        response = ctx.interceptors.model(info, request, generate)
        if self.after_model_callback is None or after_returned():
            return response
        _, value = apply_local(self.after_model_callback, "after_model", info, response)
        return as_response(value)

    def _call(
        self,
        call: FunctionCall,
        ctx: InvocationContext,
        info: CallInfo,
        registry: ToolRegistry,
        tool_context: ToolContext,
    ) -> Part:
        """One tool call through the run's interceptors; always a function response."""
        request = ToolCall(call.name, call.args, call.id)
        tool_info = info.derive("tool", call.name)

        def local(request: ToolCall) -> JSON:
            returned, value = apply_local(
                self.before_tool_callback, "before_tool", tool_info, request
            )
            if returned:
                answer: JSON = tool_answer(value)
                return answer
            return self._run(as_tool_call(value, request), registry, tool_context)

        def plain(request: ToolCall) -> JSON:
            return self._run(request, registry, tool_context)

        run = plain if self.before_tool_callback is None else local

        mark_after_returned(False)
        if ctx.interceptors:
            response = ctx.interceptors.tool(tool_info, request, run)
        else:
            response = run(request)
        if self.after_tool_callback is not None and not after_returned():
            result = ToolResult(call.name, call.args, call.id, response)
            _, value = apply_local(self.after_tool_callback, "after_tool", tool_info, result)
            response = tool_answer(value)
        return Part.from_function_response(call.name, response, id=call.id)

    def _run(self, call: ToolCall, registry: ToolRegistry, tool_context: ToolContext) -> JSON:
        """The tool itself: its result or the tool contract's failure value."""
        tool = registry.get(call.name)
        if tool is None:
            return unknown_tool(call.name)
        try:
            if tool.blocking:  # in a fiber, on an offload thread: the tool may block
                response = fibers.offload(tool.run, dict(call.args), tool_context)
            else:  # it never waits: right here, in a context of its own as offload gives
                run = contextvars.copy_context().run
                response = run(tool.run, dict(call.args), tool_context)
            size = len(response.json) if isinstance(response, RawToolResult) else None
            if (size if size is not None else json_size(response)) > MAX_TOOL_RESULT_BYTES:
                message = f"tool result over {MAX_TOOL_RESULT_BYTES} bytes"
                response = ToolFailure("too_large", message).to_value()
        except Exception as exc:
            message = redact(f"{type(exc).__name__}: {exc}")
            response = ToolFailure("exception", message).to_value()
        return response
