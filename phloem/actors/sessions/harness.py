"""The harness: the agent a session runs, built for each run from explicit inputs, and
the `AskResult` of a turn.

`build_agent(...)` is the one place a session's agent is made: a base instruction, extra
instruction text, the tool list and a `ToolContext` go in, a `ConversationAgent` comes
out; `run_interceptors(...)` puts the run's own interceptors (usage metering, compaction,
and whatever a caller adds: tool policy, confirmation) after the tree's chain. A
`ConversationAgent` is an `LlmAgent` whose model request is the whole conversation: every
earlier prompt, answer, tool call and tool response of the session, then this turn.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec

from phloem.agents.context import InvocationContext
from phloem.agents.events import Event
from phloem.agents.llm_agent import LlmAgent
from phloem.models.interceptors import CallInfo, Interceptor, Interceptors
from phloem.protocols.content import (
    Content,
    ModelRequest,
    ModelResponse,
    Part,
    Usage,
    function_responses_of,
)
from phloem.protocols.errors import ErrorKind, ErrorValue
from phloem.protocols.model import Model, ModelError
from phloem.protocols.warnings import RunWarning
from phloem.tools.contract import JSON, Tool, ToolContext

DEFAULT_INSTRUCTION = (
    "You are a careful coding agent working in the user's repository (the workspace). "
    "Use the tools to look before you change anything: read files before editing them, "
    "keep edits small and focused, and run commands with bash to check your work. Paths "
    "are relative to the workspace root. When you are done, answer briefly with what you "
    "found or changed."
)


@dataclass(frozen=True)
class RunSetup:
    """What a run's agent is built from (the seam for instruction discovery and tool
    policy: they change these inputs, nothing else)."""

    instruction: str = DEFAULT_INSTRUCTION
    extra_instruction: str = ""
    tools: tuple[Tool, ...] = ()
    interceptors: tuple[Interceptor, ...] = ()

    def system_instruction(self) -> str:
        parts = [p.strip() for p in (self.instruction, self.extra_instruction) if p.strip()]
        return "\n\n".join(parts)


INTERRUPTED: JSON = {
    "error": "interrupted",
    "message": "the call did not complete: its run was interrupted",
}


class ConversationAgent(LlmAgent):
    """An `LlmAgent` that sends the session's whole conversation with every request.

    A tool call left without its response (a run killed between the two) is answered
    with `INTERRUPTED`, so the history stays a valid call/response sequence. With
    `on_text`, a model that streams (Gemini) hands each piece of text to it as it
    arrives; the interceptors and the session see the aggregated answer as usual. A
    model that does not stream (`unsupported_streaming`) is simply called."""

    on_text: Callable[[str], None] | None = None

    def generate(self, request: ModelRequest) -> ModelResponse:
        stream = getattr(self.model, "stream", None)
        if self.on_text is None or stream is None:
            return self.model.generate(request)
        try:
            chunks = iter(stream(request))
            first = next(chunks)
        except ModelError as exc:
            if exc.kind != ErrorKind.UNSUPPORTED_STREAMING:
                raise
            return self.model.generate(request)
        final: ModelResponse | None = None
        for chunk in itertools.chain((first,), chunks):
            if not chunk.partial:
                final = chunk
            elif chunk.text:
                self.on_text(chunk.text)
        if final is None:
            raise ModelError(ErrorKind.MALFORMED_RESPONSE, "the stream ended without its answer")
        return final

    def history(self, ctx: InvocationContext) -> list[Content]:
        contents = [
            event.content
            for event in ctx.events
            if event.content is not None and event.content.parts and event.error is None
        ]
        if not contents and ctx.user_content is not None:
            contents.append(ctx.user_content)
        return close_calls(contents)


def close_calls(contents: list[Content]) -> list[Content]:
    """`contents` with an `INTERRUPTED` response after every unanswered function call."""
    out: list[Content] = []
    for i, content in enumerate(contents):
        out.append(content)
        calls = content.function_calls
        if not calls:
            continue
        following = contents[i + 1].parts if i + 1 < len(contents) else ()
        answered = {(r.name, r.id) for r in function_responses_of(following)}
        missing = [c for c in calls if (c.name, c.id) not in answered]
        if missing:
            out.append(
                Content(
                    role="user",
                    parts=tuple(
                        Part.from_function_response(c.name, dict(INTERRUPTED), id=c.id)
                        for c in missing
                    ),
                )
            )
    return out


def build_agent(
    name: str,
    model: Model,
    setup: RunSetup,
    tool_context: ToolContext,
    *,
    max_tool_rounds: int,
    on_text: Callable[[str], None] | None = None,
) -> ConversationAgent:
    """The agent of one run (see the module docstring); `on_text` gets streamed text."""
    agent = ConversationAgent(
        name,
        "",
        model,
        _literal(setup.system_instruction()),
        setup.tools,
        max_tool_rounds=max_tool_rounds,
        tool_context=tool_context,
    )
    agent.on_text = on_text
    return agent


def run_interceptors(tree: Interceptors, setup: RunSetup) -> Interceptors:
    """The tree's chain (outermost), then the run's own interceptors."""
    return Interceptors((*tree.items, *setup.interceptors))


def _literal(text: str) -> str:
    """Braces doubled: a harness instruction is literal text, not a state template."""
    return text.replace("{", "{{").replace("}", "}}")


class UsageMeter(Interceptor):
    """Sums the token usage of every model call of one run."""

    name = "usage-meter"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.usage = Usage()
        self.model_calls = 0

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        response = proceed(request)
        with self._lock:
            self.model_calls += 1
            if response.usage is not None:
                self.usage = self.usage + response.usage
        return response


class ToolCallRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """One tool call of a turn: what the model asked for and what it got back."""

    name: str
    args: JSON = msgspec.field(default_factory=dict)
    id: str | None = None
    response: JSON | None = None


class AskResult(msgspec.Struct, frozen=True, kw_only=True):
    """One turn of a session: the answer's text, its tool calls, the token usage and the
    warnings collected since the last turn (each with `code`, `message`, `path`, `line`).
    `status` is `done`, `cancelled` or `failed` (then `error` says why)."""

    session_id: str
    text: str = ""
    tool_calls: list[ToolCallRecord] = []
    usage: Usage = msgspec.field(default_factory=Usage)
    warnings: list[RunWarning] = []
    status: str = "done"
    error: ErrorValue | None = None
    model_calls: int = 0
    transcript: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "done"


@dataclass
class TurnFold:
    """Folds a turn's events into the parts of its `AskResult`."""

    agent: str
    text: str = ""
    calls: list[ToolCallRecord] = field(default_factory=list)
    error: ErrorValue | None = None

    def take(self, event: Event) -> None:
        if event.author != self.agent or event.partial:
            return
        if event.error is not None:
            self.error = event.error
            return
        content = event.content
        if content is None:
            return
        for call in content.function_calls:
            self.calls.append(ToolCallRecord(call.name, dict(call.args), call.id))
        for response in function_responses_of(content.parts):
            self._answer(response.id, response.name, response.response)
        if content.role == "model" and not content.function_calls:
            self.text = content.text

    def _answer(self, call_id: str | None, name: str, response: JSON) -> None:
        for i, record in enumerate(self.calls):
            if record.response is None and record.name == name and record.id == call_id:
                self.calls[i] = msgspec.structs.replace(record, response=response)
                return

    def take_all(self, events: Iterable[Event]) -> TurnFold:
        for event in events:
            self.take(event)
        return self


def select_tools(tools: Sequence[Tool], names: Sequence[str] | None) -> tuple[Tool, ...]:
    """`tools` in their order, only those named (all of them for None); an unknown
    name is a `ValueError`."""
    if names is None:
        return tuple(tools)
    by_name = {t.name: t for t in tools}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown tool {unknown[0]!r} (known: {', '.join(by_name)})")
    return tuple(t for t in tools if t.name in set(names))
