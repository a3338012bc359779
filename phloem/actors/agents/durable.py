"""Durable agent runs: every model response and tool result journaled, replayed on resume.

A run started with `durable = true` (`StartAgentRun.durable`) gets a journal
(`phloem.actors.runs.journal`, kind `agent`) and, innermost in its interceptor chain, a
`JournalInterceptor`. It numbers the run's model calls and tool calls in the order the
agent makes them (the same order on a replay: an agent is driven by what its model
answers and its tools return). For each call it either replays the recorded answer — a
resumed run makes no model request that the crashed run had an answer for, and runs no
tool that had returned — or marks the call as started, makes it, and records its answer
(each synced before the agent sees it).

A model call in flight at the crash is made again (a request costs money, not harm). A
tool call in flight is never run again: its answer is the failure value `interrupted`,
which the model sees and can act on (at-most-once, as for a planning run's
non-idempotent step).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import msgspec

from phloem.actors.runs.journal import RunJournal
from phloem.models.interceptors import CallInfo, Interceptor, ToolCall
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.tools.errors import ToolFailure


class JournalInterceptor(Interceptor):
    """Journals (and replays) one durable run's model responses and tool results."""

    name = "run_journal"

    def __init__(self, journal: RunJournal) -> None:
        self.journal = journal
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def _next(self) -> int:
        with self._lock:
            return next(self._numbers)

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        n = self._next()
        done = self.journal.completed.get(n)
        if isinstance(done, dict) and "response" in done:
            try:
                return msgspec.convert(done["response"], ModelResponse)
            except msgspec.ValidationError:
                pass  # not a response of this version: ask again
        self.journal.step_started(n, {"call": "model", "agent": info.agent})
        response = proceed(request)
        self.journal.step_completed(n, {"response": msgspec.to_builtins(response)})
        return response

    def tool_call(self, info: CallInfo, call: ToolCall, proceed: Callable[[ToolCall], Any]) -> Any:
        n = self._next()
        done = self.journal.completed.get(n)
        if isinstance(done, dict) and "result" in done:
            return done["result"]
        if n in self.journal.started:  # in flight at the crash: never run twice
            return ToolFailure(
                "interrupted",
                f"the call of {call.name} was in flight when the daemon stopped; "
                "it was not run again",
            ).to_value()
        self.journal.step_started(n, {"call": "tool", "tool": call.name})
        result = proceed(call)
        self.journal.step_completed(n, {"result": result})
        return result


__all__ = ["JournalInterceptor"]
