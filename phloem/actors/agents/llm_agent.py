"""`LlmAgent`: a model with an instruction, optional tools and an output key.

Each turn is one model call. The request holds the instruction (templated from state),
the original user message, earlier events of other authors as context, and this
agent's own turns; the declared tools go with it. Function calls in an answer are
executed, their responses added, and the model is called again — at most
`max_tool_rounds` times. The final text is yielded as an event and written to
`output_key`. A failed model call ends the agent with a `model_failed` error event.

A request planner (`BuiltInPlanner`, `PlanReActPlanner` from
`phloem.models.request_planners`) shapes each request and answer when given.

Tools follow the one tool contract (`phloem.tools.contract`): `Tool`s — the coding tools
need a `tool_context` naming their workspace — and plain callables, which become
`FunctionTool`s (their name, docstring and annotated parameters are the declaration).
Arguments are validated alike, and every answer is the tool's result or a failure value
`{"error": code, "message": ...}`: `arguments`, the tool's own codes, `unknown_tool`,
`too_large` (over `MAX_TOOL_RESULT_BYTES`) or `exception` (the tool raised; the message
is redacted). The `exit_loop` tool lets the model end an enclosing `LoopPlanner`: its
answer event escalates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from phloem.actors.agents.agent import Agent, call_info
from phloem.actors.agents.context import InvocationContext
from phloem.actors.agents.events import Event, EventActions
from phloem.actors.agents.templating import render
from phloem.limits import check_range
from phloem.models.interceptors import CallInfo, ToolCall
from phloem.models.request_planners import RequestPlanner
from phloem.protocols.content import Content, FunctionCall, ModelRequest, Part
from phloem.protocols.errors import PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.protocols.model import Model
from phloem.protocols.secrets import redact
from phloem.tools.contract import JSON, Tool, ToolContext, as_tool, object_schema, unknown_tool
from phloem.tools.errors import ToolFailure
from phloem.tools.registry import ToolRegistry

DEFAULT_MAX_TOOL_ROUNDS = 10
MAX_TOOL_ROUNDS_RANGE = (1, 100)
MAX_CONTEXT_EVENTS = 50
MAX_TOOL_RESULT_BYTES = 1024 * 1024


class ExitLoopTool(Tool):
    """`exit_loop`: the model calls it to end an enclosing `LoopPlanner` (escalation)."""

    name = "exit_loop"
    description = "Call this when the work is complete and the loop should stop."
    input_schema = object_schema({}, [])
    needs_workspace = False

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        return {"status": "loop exit requested"}


exit_loop = ExitLoopTool()


class LlmAgent(Agent):
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
        planner: RequestPlanner | None = None,
        tool_context: ToolContext | None = None,
    ) -> None:
        super().__init__(name, description)
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
        self.output_key = output_key
        self.max_tool_rounds = max_tool_rounds
        if planner is not None and not isinstance(planner, RequestPlanner):
            raise TypeError("planner must be a RequestPlanner (BuiltInPlanner, PlanReActPlanner)")
        self.planner = planner

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
        try:
            system = render(self.instruction, ctx.state) if self.instruction else None
        except PhloemError as exc:
            yield self.error_event(ctx, exc.kind, f"{self.name}: {exc.message}")
            return
        contents = self.history(ctx)
        declarations = self._declarations
        info = call_info(self, ctx)
        model_info = info.for_model(self.model)
        for _ in range(self.max_tool_rounds + 1):
            if ctx.cancelled:
                return
            request = ModelRequest(
                contents=tuple(contents), system_instruction=system, tools=declarations
            )
            if self.planner is not None:
                request = self.planner.build_request(request)
            try:
                response = ctx.interceptors.model(model_info, request, self.model.generate)
                ctx.usage.add(response.usage)
                if self.planner is not None:
                    response = self.planner.process_response(response)
            except Exception as exc:
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
            answers = Content(role="user", parts=tuple(self._call(c, ctx, info) for c in calls))
            escalate = any(isinstance(self._registry.get(c.name), ExitLoopTool) for c in calls)
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

    def _call(self, call: FunctionCall, ctx: InvocationContext, info: CallInfo) -> Part:
        """One tool call through the run's interceptors; always a function response."""
        request = ToolCall(call.name, call.args, call.id)
        if ctx.interceptors:
            response = ctx.interceptors.tool(info.derive("tool", call.name), request, self._run)
        else:
            response = self._run(request)
        return Part.from_function_response(call.name, response, id=call.id)

    def _run(self, call: ToolCall) -> JSON:
        """The tool itself: its result or the tool contract's failure value."""
        tool = self._registry.get(call.name)
        if tool is None:
            return unknown_tool(call.name)
        try:
            response = tool.run(dict(call.args), self.tool_context)
            if json_size(response) > MAX_TOOL_RESULT_BYTES:
                message = f"tool result over {MAX_TOOL_RESULT_BYTES} bytes"
                response = ToolFailure("too_large", message).to_value()
        except Exception as exc:
            message = redact(f"{type(exc).__name__}: {exc}")
            response = ToolFailure("exception", message).to_value()
        return response
