"""Session methods of `phloem.Client` (and `tree.client()`) and `phloem.AsyncClient`.

    sid = client.session_new()                       # the default agent, its workdir
    result = client.session_ask(sid, "explain this repository")
    print(result.text, result.usage, [w.code for w in result.warnings])
    client.session_run(sid, "and now the tests", on_event=print)

`session_ask` and `session_run` start a run (one per session: another is
`session_busy`), follow its event stream under credit and return the `AskResult`.
`tools_allow=` / `tools_deny=` restrict the turn's tools; with confirmation on,
`on_confirm(request) -> bool` answers each `confirm` item (or the owner calls
`session_confirm(session_id, call_id, approve)`). The
run belongs to this client: closing the client cancels it, as `session_cancel` does. A
`timeout` passing also cancels the run, then raises `timeout`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.client.base import AsyncClientBase, ClientBase
from phloem.client.runs import Followed, afollow_run, follow_run
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.actors.sessions.protocol import (
        NewSession,
        RunSession,
        SessionDetail,
        SessionRunStarted,
        SessionSummary,
    )
    from phloem.actors.sessions.results import AskResult
    from phloem.agents.events import Event
    from phloem.protocols.runs import ConfirmRequest, RunEvent

# The sessions service's messages carry the engine's `Event` and the turn's `AskResult`:
# they are imported by the methods that use them, so that `import phloem.client` (every
# CLI command) does not load the agent engine.

SERVICE = "sessions/service"
DEFAULT_EVENT_WINDOW = CreditWindow(64, 4 * 1024 * 1024)
DEFAULT_TURN_TIMEOUT_S = 3_600.0
"""How long a turn may run when the caller gives no `timeout` (then it is cancelled)."""
CANCEL_TIMEOUT_S = 5.0


def _new(agent: str | None, workdir: str | None, session_id: str | None) -> NewSession:
    from phloem.actors.sessions.protocol import NewSession

    return NewSession(agent, workdir, session_id)


def _result(followed: Followed) -> AskResult:
    """The turn's `AskResult` from its stream (a warning added if events were missed)."""
    result: AskResult = followed.result()
    missed = followed.warnings()
    return (
        msgspec.structs.replace(result, warnings=[*result.warnings, *missed]) if missed else result
    )


def _events(on_event: Callable[[Event], Any] | None) -> Callable[[RunEvent[Any]], Any] | None:
    return None if on_event is None else (lambda item: on_event(item.data))


def _run_request(
    session_id: str, prompt: str, tools_allow: Sequence[str] | None, tools_deny: Sequence[str]
) -> RunSession:
    from phloem.actors.sessions.protocol import RunSession

    for what, names in (("tools_allow", tools_allow), ("tools_deny", tools_deny)):
        if isinstance(names, str):
            raise TypeError(f"{what} must be a list of tool names, not a str")
    allow = None if tools_allow is None else list(tools_allow)
    return RunSession(session_id, prompt, tools_allow=allow, tools_deny=list(tools_deny))


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
        """Create a durable session; its id. `agent` names an `[agents.llm.NAME]`
        (default: `[sessions] default_agent`), `workdir` its workspace (an absolute
        path; default: `[sessions] workdir`, else the daemon's directory)."""
        from phloem.actors.sessions.protocol import SessionSummary

        summary = self.ask(
            SERVICE, _new(agent, workdir, session_id), timeout=timeout, reply_type=SessionSummary
        )
        return summary.id

    def session_list(self, *, timeout: float | None = None) -> list[SessionSummary]:
        from phloem.actors.sessions.protocol import ListSessions, SessionSummary

        result: list[SessionSummary] = self.ask(
            SERVICE, ListSessions(), timeout=timeout, reply_type=list[SessionSummary]
        )
        return result

    def session_show(
        self, session_id: str, *, max_events: int = 1_000, timeout: float | None = None
    ) -> SessionDetail:
        from phloem.actors.sessions.protocol import SessionDetail, ShowSession

        result: SessionDetail = self.ask(
            SERVICE, ShowSession(session_id, max_events), timeout=timeout, reply_type=SessionDetail
        )
        return result

    def session_delete(self, session_id: str, *, timeout: float | None = None) -> bool:
        from phloem.actors.sessions.protocol import DeleteSession

        return bool(self.ask(SERVICE, DeleteSession(session_id), timeout=timeout)["deleted"])

    def session_cancel(self, session_id: str, *, timeout: float | None = None) -> bool:
        """Cancel the session's active run (True if there was one)."""
        from phloem.actors.sessions.protocol import CancelSession

        return bool(self.ask(SERVICE, CancelSession(session_id), timeout=timeout)["cancelled"])

    def session_start(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
    ) -> SessionRunStarted:
        """Start a turn; follow it with `session_follow` (or `subscribe`).
        `tools_allow` / `tools_deny` restrict this turn's tools (denials win)."""
        from phloem.actors.sessions.protocol import SessionRunStarted

        started: SessionRunStarted = self.ask(
            SERVICE,
            _run_request(session_id, prompt, tools_allow, tools_deny),
            reply_type=SessionRunStarted,
        )
        return started

    def session_confirm(
        self, session_id: str, call_id: str, approve: bool, *, timeout: float | None = None
    ) -> None:
        """Answer a `confirm` item of the session's run: run the tool call `call_id` or
        refuse it. Only the run's owner may (`not_owner`); `unknown_call` when nothing
        waits under that id."""
        from phloem.actors.sessions.protocol import ConfirmSession

        self.ask(SERVICE, ConfirmSession(session_id, call_id, bool(approve)), timeout=timeout)

    def session_run(
        self,
        session_id: str,
        prompt: str,
        *,
        on_event: Callable[[Event], None] | None = None,
        on_confirm: Callable[[ConfirmRequest], bool] | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        """Run one turn; `on_event` sees each event as it arrives (under credit),
        `on_confirm` answers each confirmation (True runs the tool call)."""
        started = self.session_start(
            session_id, prompt, tools_allow=tools_allow, tools_deny=tools_deny
        )
        return self.session_follow(
            started, on_event=on_event, on_confirm=on_confirm, timeout=timeout, window=window
        )

    def session_ask(
        self,
        session_id: str,
        prompt: str,
        *,
        timeout: float | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        on_confirm: Callable[[ConfirmRequest], bool] | None = None,
    ) -> AskResult:
        """Run one turn and return its `AskResult`."""
        return self.session_run(
            session_id,
            prompt,
            timeout=timeout,
            tools_allow=tools_allow,
            tools_deny=tools_deny,
            on_confirm=on_confirm,
        )

    def session_follow(
        self,
        started: SessionRunStarted,
        *,
        on_event: Callable[[Event], None] | None = None,
        on_confirm: Callable[[ConfirmRequest], bool] | None = None,
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        """Follow a started turn to its `AskResult`; past `timeout` (default
        `DEFAULT_TURN_TIMEOUT_S`) the run is cancelled and `timeout` raised."""
        from phloem.actors.sessions.protocol import SessionStreamItem

        limit = DEFAULT_TURN_TIMEOUT_S if timeout is None else timeout
        sid = started.session_id
        try:
            followed = follow_run(
                self,
                started.stream,
                SessionStreamItem,
                what=f"the run of session {sid}",
                on_event=_events(on_event),
                on_confirm=on_confirm,
                answer=lambda call_id, approve: self.session_confirm(sid, call_id, approve),
                window=window or DEFAULT_EVENT_WINDOW,
                deadline=time.monotonic() + limit,
            )
        except PhloemError as err:
            if err.kind != ErrorKind.TIMEOUT:
                self._abandon(sid)
                raise
            self.session_cancel(sid, timeout=CANCEL_TIMEOUT_S)
            raise _timed_out(started, limit) from None
        except BaseException:
            self._abandon(sid)  # on_event or on_confirm raised, or the caller interrupted
            raise
        return _result(followed)

    def _abandon(self, session_id: str) -> None:
        """A follow that stopped early cancels its run, so the session is released and
        its tools stop (plasmid: stopping iteration early cancels the run); a cancel that
        cannot be sent (the connection is gone) is the daemon's job: it cancels the runs
        of a client that disconnects."""
        with contextlib.suppress(Exception):
            self.session_cancel(session_id, timeout=CANCEL_TIMEOUT_S)


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
        from phloem.actors.sessions.protocol import SessionSummary

        summary = await self.ask(
            SERVICE, _new(agent, workdir, session_id), timeout=timeout, reply_type=SessionSummary
        )
        return str(summary.id)

    async def session_list(self, *, timeout: float | None = None) -> list[SessionSummary]:
        from phloem.actors.sessions.protocol import ListSessions, SessionSummary

        result: list[SessionSummary] = await self.ask(
            SERVICE, ListSessions(), timeout=timeout, reply_type=list[SessionSummary]
        )
        return result

    async def session_show(
        self, session_id: str, *, max_events: int = 1_000, timeout: float | None = None
    ) -> SessionDetail:
        from phloem.actors.sessions.protocol import SessionDetail, ShowSession

        result: SessionDetail = await self.ask(
            SERVICE, ShowSession(session_id, max_events), timeout=timeout, reply_type=SessionDetail
        )
        return result

    async def session_delete(self, session_id: str, *, timeout: float | None = None) -> bool:
        from phloem.actors.sessions.protocol import DeleteSession

        reply = await self.ask(SERVICE, DeleteSession(session_id), timeout=timeout)
        return bool(reply["deleted"])

    async def session_cancel(self, session_id: str, *, timeout: float | None = None) -> bool:
        from phloem.actors.sessions.protocol import CancelSession

        reply = await self.ask(SERVICE, CancelSession(session_id), timeout=timeout)
        return bool(reply["cancelled"])

    async def session_start(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
    ) -> SessionRunStarted:
        from phloem.actors.sessions.protocol import SessionRunStarted

        started: SessionRunStarted = await self.ask(
            SERVICE,
            _run_request(session_id, prompt, tools_allow, tools_deny),
            reply_type=SessionRunStarted,
        )
        return started

    async def session_confirm(
        self, session_id: str, call_id: str, approve: bool, *, timeout: float | None = None
    ) -> None:
        """Answer a `confirm` item of the session's run (see the sync client)."""
        from phloem.actors.sessions.protocol import ConfirmSession

        await self.ask(SERVICE, ConfirmSession(session_id, call_id, bool(approve)), timeout=timeout)

    async def session_run(
        self,
        session_id: str,
        prompt: str,
        *,
        on_event: Callable[[Event], Awaitable[None] | None] | None = None,
        on_confirm: Callable[[ConfirmRequest], Awaitable[bool] | bool] | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        started = await self.session_start(
            session_id, prompt, tools_allow=tools_allow, tools_deny=tools_deny
        )
        return await self.session_follow(
            started, on_event=on_event, on_confirm=on_confirm, timeout=timeout, window=window
        )

    async def session_ask(
        self,
        session_id: str,
        prompt: str,
        *,
        timeout: float | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        on_confirm: Callable[[ConfirmRequest], Awaitable[bool] | bool] | None = None,
    ) -> AskResult:
        return await self.session_run(
            session_id,
            prompt,
            timeout=timeout,
            tools_allow=tools_allow,
            tools_deny=tools_deny,
            on_confirm=on_confirm,
        )

    async def session_follow(
        self,
        started: SessionRunStarted,
        *,
        on_event: Callable[[Event], Awaitable[None] | None] | None = None,
        on_confirm: Callable[[ConfirmRequest], Awaitable[bool] | bool] | None = None,
        timeout: float | None = None,
        window: CreditWindow | None = None,
    ) -> AskResult:
        from phloem.actors.sessions.protocol import SessionStreamItem

        limit = DEFAULT_TURN_TIMEOUT_S if timeout is None else timeout
        sid = started.session_id

        async def answer(call_id: str, approve: bool) -> None:
            await self.session_confirm(sid, call_id, approve)

        try:
            followed = await afollow_run(
                self,
                started.stream,
                SessionStreamItem,
                what=f"the run of session {sid}",
                on_event=_events(on_event),
                on_confirm=on_confirm,
                answer=answer,
                window=window or DEFAULT_EVENT_WINDOW,
                deadline=time.monotonic() + limit,
            )
        except PhloemError as err:
            if err.kind != ErrorKind.TIMEOUT:
                await self._abandon(sid)
                raise
            await self.session_cancel(sid, timeout=CANCEL_TIMEOUT_S)
            raise _timed_out(started, limit) from None
        except BaseException:
            await self._abandon(sid)  # a callback raised, or the task was cancelled
            raise
        return _result(followed)

    async def _abandon(self, session_id: str) -> None:
        """As the sync client's: a follow that stopped early cancels its run (shielded,
        so a cancelled task still sends it)."""
        import asyncio

        with contextlib.suppress(Exception):
            await asyncio.shield(self.session_cancel(session_id, timeout=CANCEL_TIMEOUT_S))
