"""Session methods of `phloem.Client` (and `tree.client()`) and `phloem.AsyncClient`.

    sid = client.session_new()                       # the default harness agent, its workdir
    result = client.session_ask(sid, "explain this repository")
    print(result.text, result.usage, [w.code for w in result.warnings])
    client.session_run(sid, "and now the tests", on_event=print)

`session_ask` and `session_run` start a run (one per session: another is
`session_busy`), follow its event stream under credit and return the `AskResult`. The
run belongs to this client: closing the client cancels it, as `session_cancel` does. A
`timeout` passing also cancels the run, then raises `timeout`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from phloem.actors.agents.events import Event
from phloem.actors.sessions.harness import AskResult
from phloem.actors.sessions.protocol import (
    CancelSession,
    DeleteSession,
    ListSessions,
    NewSession,
    RunSession,
    SessionDetail,
    SessionRunEvent,
    SessionRunStarted,
    SessionStreamItem,
    SessionSummary,
    ShowSession,
)
from phloem.client.base import AsyncClientBase, ClientBase
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision.credit import CreditWindow

SERVICE = "sessions/service"
DEFAULT_EVENT_WINDOW = CreditWindow(64, 4 * 1024 * 1024)
DEFAULT_TURN_TIMEOUT_S = 3_600.0
"""How long a turn may run when the caller gives no `timeout` (then it is cancelled)."""
CANCEL_TIMEOUT_S = 5.0


def _new(agent: str | None, workdir: str | None, session_id: str | None) -> NewSession:
    return NewSession(agent, workdir, session_id)


def _item(item: Any, started: SessionRunStarted) -> Event | AskResult:
    if isinstance(item, SessionRunEvent):
        return item.event
    result: AskResult = item.result
    return result


def _ended(err: PhloemError, started: SessionRunStarted) -> PhloemError:
    if err.kind != ErrorKind.CLOSED:
        return err
    return PhloemError(
        ErrorKind.RUN_INCOMPLETE,
        f"the run of session {started.session_id} ended without its result",
    )


def _timed_out(started: SessionRunStarted, timeout: float) -> PhloemError:
    return PhloemError(
        ErrorKind.TIMEOUT,
        f"session {started.session_id}: no result within {timeout} s; the run was cancelled",
    )


class SessionClientMethods(ClientBase):
    def session_new(
        self,
        agent: str | None = None,
        workdir: str | None = None,
        session_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> str:
        """Create a durable session; its id. `agent` names a `[sessions.agents.NAME]`
        (default: `[sessions] default_agent`), `workdir` its workspace (an absolute
        path; default: `[sessions] workdir`, else the daemon's directory)."""
        summary = self.ask(
            SERVICE, _new(agent, workdir, session_id), timeout=timeout, reply_type=SessionSummary
        )
        return summary.id

    def session_list(self, *, timeout: float | None = None) -> list[SessionSummary]:
        result: list[SessionSummary] = self.ask(
            SERVICE, ListSessions(), timeout=timeout, reply_type=list[SessionSummary]
        )
        return result

    def session_show(
        self, session_id: str, *, max_events: int = 1_000, timeout: float | None = None
    ) -> SessionDetail:
        result: SessionDetail = self.ask(
            SERVICE, ShowSession(session_id, max_events), timeout=timeout, reply_type=SessionDetail
        )
        return result

    def session_delete(self, session_id: str, *, timeout: float | None = None) -> bool:
        return bool(self.ask(SERVICE, DeleteSession(session_id), timeout=timeout)["deleted"])

    def session_cancel(self, session_id: str, *, timeout: float | None = None) -> bool:
        """Cancel the session's active run (True if there was one)."""
        return bool(self.ask(SERVICE, CancelSession(session_id), timeout=timeout)["cancelled"])

    def session_start(self, session_id: str, prompt: str) -> SessionRunStarted:
        """Start a turn; follow it with `session_follow` (or `subscribe`)."""
        started: SessionRunStarted = self.ask(
            SERVICE, RunSession(session_id, prompt), reply_type=SessionRunStarted
        )
        return started

    def session_run(
        self,
        session_id: str,
        prompt: str,
        *,
        on_event: Callable[[Event], None] | None = None,
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        """Run one turn; `on_event` sees each event as it arrives (under credit)."""
        started = self.session_start(session_id, prompt)
        return self.session_follow(started, on_event=on_event, timeout=timeout, window=window)

    def session_ask(
        self, session_id: str, prompt: str, *, timeout: float | None = None
    ) -> AskResult:
        """Run one turn and return its `AskResult`."""
        return self.session_run(session_id, prompt, timeout=timeout)

    def session_follow(
        self,
        started: SessionRunStarted,
        *,
        on_event: Callable[[Event], None] | None = None,
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        limit = DEFAULT_TURN_TIMEOUT_S if timeout is None else timeout
        deadline = time.monotonic() + limit
        stream = self.subscribe(
            started.stream, window or DEFAULT_EVENT_WINDOW, event_type=SessionStreamItem
        )
        with stream:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    if remaining <= 0:
                        raise PhloemError(ErrorKind.TIMEOUT, "turn deadline passed")
                    got = _item(stream.recv(remaining), started)
                except PhloemError as err:
                    if err.kind == ErrorKind.TIMEOUT:
                        self.session_cancel(started.session_id, timeout=CANCEL_TIMEOUT_S)
                        raise _timed_out(started, limit) from None
                    raise _ended(err, started) from None
                if isinstance(got, AskResult):
                    return got
                if on_event is not None:
                    on_event(got)


class AsyncSessionMethods(AsyncClientBase):
    """The session methods of `AsyncClient`, as coroutines (same requests and errors)."""

    async def session_new(
        self,
        agent: str | None = None,
        workdir: str | None = None,
        session_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> str:
        summary = await self.ask(
            SERVICE, _new(agent, workdir, session_id), timeout=timeout, reply_type=SessionSummary
        )
        return str(summary.id)

    async def session_list(self, *, timeout: float | None = None) -> list[SessionSummary]:
        result: list[SessionSummary] = await self.ask(
            SERVICE, ListSessions(), timeout=timeout, reply_type=list[SessionSummary]
        )
        return result

    async def session_show(
        self, session_id: str, *, max_events: int = 1_000, timeout: float | None = None
    ) -> SessionDetail:
        result: SessionDetail = await self.ask(
            SERVICE, ShowSession(session_id, max_events), timeout=timeout, reply_type=SessionDetail
        )
        return result

    async def session_delete(self, session_id: str, *, timeout: float | None = None) -> bool:
        reply = await self.ask(SERVICE, DeleteSession(session_id), timeout=timeout)
        return bool(reply["deleted"])

    async def session_cancel(self, session_id: str, *, timeout: float | None = None) -> bool:
        reply = await self.ask(SERVICE, CancelSession(session_id), timeout=timeout)
        return bool(reply["cancelled"])

    async def session_start(self, session_id: str, prompt: str) -> SessionRunStarted:
        started: SessionRunStarted = await self.ask(
            SERVICE, RunSession(session_id, prompt), reply_type=SessionRunStarted
        )
        return started

    async def session_run(
        self,
        session_id: str,
        prompt: str,
        *,
        on_event: Callable[[Event], Awaitable[None] | None] | None = None,
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        started = await self.session_start(session_id, prompt)
        return await self.session_follow(started, on_event=on_event, timeout=timeout, window=window)

    async def session_ask(
        self, session_id: str, prompt: str, *, timeout: float | None = None
    ) -> AskResult:
        return await self.session_run(session_id, prompt, timeout=timeout)

    async def session_follow(
        self,
        started: SessionRunStarted,
        *,
        on_event: Callable[[Event], Awaitable[None] | None] | None = None,
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        limit = DEFAULT_TURN_TIMEOUT_S if timeout is None else timeout
        deadline = time.monotonic() + limit
        stream = await self.subscribe(
            started.stream, window or DEFAULT_EVENT_WINDOW, event_type=SessionStreamItem
        )
        async with stream:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    if remaining <= 0:
                        raise PhloemError(ErrorKind.TIMEOUT, "turn deadline passed")
                    got = _item(await stream.recv(remaining), started)
                except PhloemError as err:
                    if err.kind == ErrorKind.TIMEOUT:
                        await self.session_cancel(started.session_id, timeout=CANCEL_TIMEOUT_S)
                        raise _timed_out(started, limit) from None
                    raise _ended(err, started) from None
                if isinstance(got, AskResult):
                    return got
                if on_event is not None:
                    outcome = on_event(got)
                    if inspect.isawaitable(outcome):
                        await outcome
