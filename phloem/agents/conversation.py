"""`ConversationAgent`: an `LlmAgent` whose model request is a whole conversation.

A session's turn runs one: every earlier prompt, answer, tool call and tool response of
the session, then this turn, go with each request. `DEFAULT_CODING_INSTRUCTION` is the
built-in instruction of a `harness = true` agent whose `instruction` is empty.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from phloem.agents.context import InvocationContext
from phloem.agents.llm_agent import LlmAgent
from phloem.models.waiting import call_model
from phloem.protocols.content import (
    Content,
    ModelRequest,
    ModelResponse,
    Part,
    function_responses_of,
)
from phloem.protocols.errors import ErrorKind
from phloem.protocols.model import ModelError
from phloem.supervision import fibers
from phloem.tools.contract import JSON

DEFAULT_CODING_INSTRUCTION = (
    "You are a careful coding agent working in the user's repository (the workspace). "
    "Use the tools to look before you change anything: read files before editing them, "
    "keep edits small and focused, and run commands with bash to check your work. Paths "
    "are relative to the workspace root. When you are done, answer briefly with what you "
    "found or changed."
)


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
            return call_model(self.model, request)
        return fibers.offload(self._streamed, stream, request)  # a stream blocks

    def _streamed(
        self, stream: Callable[[ModelRequest], Iterable[ModelResponse]], request: ModelRequest
    ) -> ModelResponse:
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
            elif chunk.text and self.on_text is not None:
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
