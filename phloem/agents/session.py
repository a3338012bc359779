"""Sessions and the in-memory session service.

A `Session` is one conversation: an id, the app and user it belongs to, its state and
its ordered events. State keys are scoped by prefix:

- `app:key`  shared by every session of the app,
- `user:key` shared by every session of the same app and user,
- `temp:key` lives only for the current invocation (dropped by `end_invocation`),
- `key`      belongs to this session.

`session.state` is the merged view of all four. State changes only through
`SessionService.append_event`, which applies the event's `state_delta` and
`state_remove` to the right scope. The in-memory service bounds how many sessions it
keeps and how many events a session may hold; the durable one
(`phloem.actors.sessions.durable`) has the same surface (`SessionService`).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from phloem.agents.events import Event
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"

# Named limits.
DEFAULT_MAX_SESSIONS = 10_000
MAX_SESSIONS_RANGE = (1, 1_000_000)
DEFAULT_MAX_EVENTS = 10_000
MAX_EVENTS_RANGE = (1, 1_000_000)


def scope_of(key: str) -> str:
    """`app`, `user`, `temp` or `session`: where a state key is stored."""
    if key.startswith(APP_PREFIX):
        return "app"
    if key.startswith(USER_PREFIX):
        return "user"
    if key.startswith(TEMP_PREFIX):
        return "temp"
    return "session"


@dataclass(eq=False)
class Session:
    """One conversation. Read `state` and `events`; change them only by appending events."""

    id: str
    app: str
    user: str
    _own: dict[str, Any] = field(default_factory=dict, repr=False)
    _app_state: dict[str, Any] = field(default_factory=dict, repr=False)
    _user_state: dict[str, Any] = field(default_factory=dict, repr=False)
    _events: list[Event] = field(default_factory=list, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def state(self) -> dict[str, Any]:
        """A snapshot of the merged state (app, user, temp and session keys)."""
        with self._lock:
            merged = dict(self._app_state)
            merged.update(self._user_state)
            merged.update(self._own)
            return merged

    @property
    def events(self) -> tuple[Event, ...]:
        with self._lock:
            return tuple(self._events)

    def _apply(self, delta: Mapping[str, Any], remove: Iterable[str]) -> None:
        for key, value in delta.items():
            self._store_for(key)[key] = value
        for key in remove:
            self._store_for(key).pop(key, None)

    def _store_for(self, key: str) -> dict[str, Any]:
        scope = scope_of(key)
        if scope == "app":
            return self._app_state
        if scope == "user":
            return self._user_state
        return self._own


class SessionService(Protocol):
    """What a runner needs of a session service: the in-memory one below, or the
    durable one (`phloem.actors.sessions.durable.DurableSessionService`)."""

    def create_session(
        self,
        app: str,
        user: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session: ...

    def append_event(self, session: Session, event: Event) -> Event: ...

    def end_invocation(self, session: Session) -> None: ...


class InMemorySessionService:
    """Sessions kept in memory, bounded by `max_sessions` and `max_events` per session."""

    def __init__(
        self, *, max_sessions: int = DEFAULT_MAX_SESSIONS, max_events: int = DEFAULT_MAX_EVENTS
    ) -> None:
        self.max_sessions = check_range("max_sessions", max_sessions, *MAX_SESSIONS_RANGE)
        self.max_events = check_range("max_events", max_events, *MAX_EVENTS_RANGE)
        self._lock = threading.RLock()
        self._sessions: dict[str, Session] = {}
        self._app_states: dict[str, dict[str, Any]] = {}
        self._user_states: dict[tuple[str, str], dict[str, Any]] = {}

    def create_session(
        self,
        app: str,
        user: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session; `state` seeds it (prefixed keys go to their shared scopes)."""
        if not app:
            raise ValueError("app must be a non-empty string")
        if not user:
            raise ValueError("user must be a non-empty string")
        with self._lock:
            sid = session_id or f"s-{secrets.token_hex(8)}"
            if sid in self._sessions:
                raise PhloemError(ErrorKind.SESSION_EXISTS, f"session {sid!r} already exists")
            if len(self._sessions) >= self.max_sessions:
                raise PhloemError(
                    ErrorKind.LIMIT_EXCEEDED, f"max_sessions ({self.max_sessions}) reached"
                )
            session = Session(
                id=sid,
                app=app,
                user=user,
                _app_state=self._app_states.setdefault(app, {}),
                _user_state=self._user_states.setdefault((app, user), {}),
                _lock=self._lock,
            )
            session._apply(dict(state or {}), ())
            self._sessions[sid] = session
            return session

    def get_session(self, session_id: str) -> Session:
        with self._lock:
            try:
                return self._sessions[session_id]
            except KeyError:
                raise PhloemError(ErrorKind.UNKNOWN_SESSION, f"no session {session_id!r}") from None

    def list_sessions(self, app: str, user: str | None = None) -> list[Session]:
        with self._lock:
            return [
                s
                for s in self._sessions.values()
                if s.app == app and (user is None or s.user == user)
            ]

    def delete_session(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    def append_event(self, session: Session, event: Event) -> Event:
        """Record `event` and apply its state changes; `limit_exceeded` past `max_events`."""
        with self._lock:
            if len(session._events) >= self.max_events:
                raise PhloemError(
                    ErrorKind.LIMIT_EXCEEDED,
                    f"session {session.id!r} reached max_events ({self.max_events})",
                )
            session._events.append(event)
            session._apply(event.actions.state_delta, event.actions.state_remove)
            return event

    def end_invocation(self, session: Session) -> None:
        """Drop `temp:` keys: they live for one invocation only."""
        with self._lock:
            for key in [k for k in session._own if k.startswith(TEMP_PREFIX)]:
                del session._own[key]
