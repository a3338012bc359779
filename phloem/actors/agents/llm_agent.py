"""`LlmAgent`: a model with an instruction, optional tools and an output key.

Each turn is one model call. The request holds the instruction (templated from state),
the original user message, earlier events of other authors as context, and this
agent's own turns; the declared tools go with it. Function calls in an answer are
executed, their responses added, and the model is called again — at most
`max_tool_rounds` times. The final text is yielded as an event and written to
`output_key`. A failed model call ends the agent with a `model_failed` error event.

A request planner (`BuiltInPlanner`, `PlanReActPlanner` from
`phloem.models.request_planners`) shapes each request and answer when given.

Tools are plain callables (their name, docstring and annotated parameters become the
declaration), `phloem.tools` tools (given a `tool_context` naming their workspace), or
any object with `declaration` and `call(args) -> dict`. The `exit_loop` tool lets the
model end an enclosing `LoopPlanner`: its answer event escalates.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from phloem.actors.agents.agent import Agent
from phloem.actors.agents.context import InvocationContext
from phloem.actors.agents.events import Event, EventActions
from phloem.actors.agents.templating import render
from phloem.models.request_planners import RequestPlanner
from phloem.protocols.content import (
    Content,
    FunctionCall,
    FunctionDeclaration,
    ModelRequest,
    Part,
)
from phloem.protocols.errors import PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.protocols.model import Model
from phloem.supervision.reasons import redact
from phloem.tools.contract import Tool, ToolContext

DEFAULT_MAX_TOOL_ROUNDS = 10
MAX_TOOL_ROUNDS_RANGE = (1, 100)
MAX_CONTEXT_EVENTS = 50
MAX_TOOL_RESULT_BYTES = 1024 * 1024

_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


@runtime_checkable
class AgentTool(Protocol):
    @property
    def declaration(self) -> FunctionDeclaration: ...

    def call(self, args: dict[str, Any]) -> dict[str, Any]: ...


class CallableTool:
    """A plain function as a tool: keyword arguments in, any JSON value out."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        props: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            ann = param.annotation
            schema: dict[str, Any] = {}
            if isinstance(ann, type) and ann in _JSON_TYPES:
                schema["type"] = _JSON_TYPES[ann]
            elif isinstance(ann, str) and ann in {t.__name__ for t in _JSON_TYPES}:
                schema["type"] = _JSON_TYPES[next(t for t in _JSON_TYPES if t.__name__ == ann)]
            props[pname] = schema
            if param.default is param.empty:
                required.append(pname)
        params: dict[str, Any] | None = None
        if props:
            params = {"type": "object", "properties": props, "required": required}
        self.declaration = FunctionDeclaration(
            name=fn.__name__, description=inspect.getdoc(fn) or "", parameters=params
        )

    def call(self, args: dict[str, Any]) -> dict[str, Any]:
        value = self.fn(**args)
        return value if isinstance(value, dict) else {"result": value}


class ContractTool:
    """A `phloem.tools` tool (read, write, edit, bash, grep, ...) bound to a context."""

    def __init__(self, tool: Tool, ctx: ToolContext) -> None:
        self.tool = tool
        self.ctx = ctx
        self.declaration = FunctionDeclaration(
            name=tool.name, description=tool.description, parameters=dict(tool.input_schema)
        )

    def call(self, args: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.tool.run(args, self.ctx)
        return result


class ExitLoopTool:
    """`exit_loop`: the model calls it to end an enclosing `LoopPlanner` (escalation)."""

    declaration = FunctionDeclaration(
        name="exit_loop",
        description="Call this when the work is complete and the loop should stop.",
    )

    def call(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"status": "loop exit requested"}


exit_loop = ExitLoopTool()


def as_tool(tool: Any, tool_context: ToolContext | None = None) -> AgentTool:
    if isinstance(tool, Tool):
        if tool_context is None:
            raise TypeError(f"tool {tool.name!r} needs tool_context (its workspace)")
        return ContractTool(tool, tool_context)
    if isinstance(tool, AgentTool):
        return tool
    if callable(tool):
        return CallableTool(tool)
    raise TypeError("tools must be callables or objects with declaration and call(args)")


class LlmAgent(Agent):
    def __init__(
        self,
        name: str,
        description: str,
        model: Model,
        instruction: str = "",
        tools: Sequence[Any] = (),
        output_key: str | None = None,
        *,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        planner: RequestPlanner | None = None,
        tool_context: ToolContext | None = None,
    ) -> None:
        super().__init__(name, description)
        if not callable(getattr(model, "generate", None)):
            raise TypeError("model must have a generate(request) method")
        if isinstance(max_tool_rounds, bool) or not isinstance(max_tool_rounds, int):
            raise TypeError("max_tool_rounds must be an int")
        lo, hi = MAX_TOOL_ROUNDS_RANGE
        if not lo <= max_tool_rounds <= hi:
            raise ValueError(f"max_tool_rounds must be between {lo} and {hi}")
        self.model = model
        self.instruction = instruction
        self.tools = tuple(as_tool(t, tool_context) for t in tools)
        self._by_name = {t.declaration.name: t for t in self.tools}
        if len(self._by_name) != len(self.tools):
            raise ValueError("tools must have unique names")
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
        declarations = tuple(t.declaration for t in self.tools)
        for _ in range(self.max_tool_rounds + 1):
            if ctx.cancelled:
                return
            request = ModelRequest(
                contents=tuple(contents), system_instruction=system, tools=declarations
            )
            if self.planner is not None:
                request = self.planner.build_request(request)
            try:
                response = self.model.generate(request)
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
            answers = Content(role="user", parts=tuple(self._call(c) for c in calls))
            escalate = any(isinstance(self._by_name.get(c.name), ExitLoopTool) for c in calls)
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

    def _call(self, call: FunctionCall) -> Part:
        tool = self._by_name.get(call.name)
        if tool is None:
            response: dict[str, Any] = {"error": f"unknown tool {call.name!r}"}
        else:
            try:
                response = tool.call(dict(call.args))
                if json_size(response) > MAX_TOOL_RESULT_BYTES:
                    response = {"error": f"tool result over {MAX_TOOL_RESULT_BYTES} bytes"}
            except Exception as exc:
                response = {"error": redact(f"{type(exc).__name__}: {exc}")}
        return Part.from_function_response(call.name, response, id=call.id)
