"""What a session's turn gives back: the `AskResult` (its text, tool calls, token usage,
warnings and status), folded from the turn's events by `TurnFold`, with the usage summed
by the `UsageMeter` interceptor of the run."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from phloem.agents.events import Event
from phloem.models.interceptors import CallInfo, Interceptor
from phloem.protocols.content import ModelRequest, ModelResponse, Usage, function_responses_of
from phloem.protocols.errors import ErrorValue
from phloem.protocols.warnings import RunWarning
from phloem.tools.contract import JSON


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
