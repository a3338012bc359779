"""`DurableSessionService`: sessions on disk, with the in-memory service's surface.

Layout under the store's directory (directories 0700, files 0600):

    .lock                           held (flock) by the one process using the store, which
                                    writes its pid (and socket) in (`storelock`)
    <app>/app_state.jsonl, .json    the app's state journal and its derived snapshot
    <app>/users/<user>/user_state.jsonl, .json
    <app>/sessions/<id>.jsonl       one transcript per session (`transcript.py`)
    <app>/pending/<id>.create       markers of a create or delete under way
    <app>/pending/<id>.delete

Create and delete survive a crash at any point: a marker is written (and synced) first
and removed last; opening the store finishes or undoes whatever a marker names (a
half-created session without a valid header is removed, a half-deleted one is deleted).
An event is durable when `append_event` returns. Operations on one session are
serialized by its lock; different sessions proceed in parallel; `run_lease` allows one
active run per session (`session_busy`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from phloem.actors.sessions.ids import decode_id, encode_id, new_session_id
from phloem.actors.sessions.journal import StateJournal
from phloem.actors.sessions.transcript import (
    Header,
    Transcript,
    count_events,
    header_line,
    new_header,
    persistable,
)
from phloem.agents.events import Event
from phloem.agents.session import (
    APP_PREFIX,
    TEMP_PREFIX,
    USER_PREFIX,
    Session,
    scope_of,
)
from phloem.base import storelock
from phloem.base.durablefiles import (
    AppendFile,
    io_error,
    private_dir,
    read_jsonl,
    remove,
    sync_dir,
    write_atomic,
)
from phloem.base.logs import get_logger
from phloem.protocols.depth import check_json_depth
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.warnings import RunWarning, Warnings

log = get_logger("phloem.sessions")

DEFAULT_MAX_CACHED = 256
MAX_CACHED_RANGE = (1, 100_000)
DEFAULT_MAX_EVENTS = 100_000
MAX_EVENTS_RANGE = (1, 10_000_000)


@dataclass(frozen=True)
class SessionInfo:
    """What a listing shows without loading the transcript."""

    id: str
    user: str
    created: float
    updated: float
    size: int
    meta: dict[str, Any]
    path: str

    @classmethod
    def of(cls, header: Header, path: Path) -> SessionInfo:
        """The facts of the transcript at `path` whose header is `header` (stats it)."""
        stat = path.stat()
        return cls(
            header.id,
            header.user,
            header.created,
            stat.st_mtime,
            stat.st_size,
            dict(header.meta),
            str(path),
        )


@dataclass
class _Open:
    session: Session
    transcript: Transcript
    lock: threading.RLock


class DurableSessionService:
    """Durable sessions of one app under `root` (see the module docstring)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        app: str = "phloem",
        *,
        sync: bool = True,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_cached: int = DEFAULT_MAX_CACHED,
    ) -> None:
        self.sync = sync
        self.app = app
        self.max_events = check_range("max_events", max_events, *MAX_EVENTS_RANGE)
        self.max_cached = check_range("max_cached", max_cached, *MAX_CACHED_RANGE)
        self.root = Path(root)
        try:
            private_dir(self.root, sync)
            self._store_lock = storelock.claim(self.root)
        except OSError as exc:
            raise io_error(f"cannot open the session store {self.root}", exc) from None
        self.app_dir = self.root / encode_id(app, "app")
        self.sessions_dir = self.app_dir / "sessions"
        self.pending_dir = self.app_dir / "pending"
        self._lock = threading.RLock()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._busy: set[str] = set()
        self._warnings: dict[str, Warnings] = {}
        self._store_warnings = Warnings()
        self._users: dict[str, StateJournal] = {}
        try:
            for directory in (self.app_dir, self.sessions_dir, self.pending_dir):
                private_dir(directory, sync)
            self._recover()
            self._app_journal = StateJournal(self.app_dir, "app_state", sync)
        except OSError as exc:
            self._unlock()
            raise io_error(f"cannot open the session store {self.root}", exc) from None
        except BaseException:
            self._unlock()
            raise
        self._adopt(self._app_journal)

    # -- recovery ----------------------------------------------------------------------------

    def _recover(self) -> None:
        """Finish or undo every create and delete a crash interrupted."""
        for marker in sorted(self.pending_dir.iterdir()):
            name, _, action = marker.name.rpartition(".")
            target = self.sessions_dir / f"{name}.jsonl"
            half_made = action == "create" and target.exists() and not _has_header(target)
            if action == "delete" or half_made:
                remove(target, self.sync)
            remove(self.sessions_dir / f".{name}.jsonl.tmp", self.sync)
            remove(marker, self.sync)
        for stray in self.sessions_dir.glob(".*.tmp"):
            remove(stray, self.sync)

    def _adopt(self, journal: StateJournal) -> None:
        for warning in journal.warnings:
            _log(warning)
            self._store_warnings.add(warning)
        journal.warnings.clear()

    def _user(self, user: str) -> StateJournal:
        with self._lock:
            journal = self._users.get(user)
            if journal is None:
                directory = private_dir(self.app_dir / "users" / encode_id(user, "user"), self.sync)
                journal = self._users[user] = StateJournal(directory, "user_state", self.sync)
                self._adopt(journal)
            return journal

    # -- the session service surface ---------------------------------------------------------

    def create_session(
        self,
        app: str,
        user: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new durable session; `state` seeds it (prefixed keys go to their scopes,
        `temp:` keys are dropped)."""
        self._check_app(app)
        sid = session_id or new_session_id()
        name = encode_id(sid)
        encode_id(user, "user")
        seed = dict(state or {})
        own = {k: v for k, v in seed.items() if scope_of(k) == "session"}
        with self._lock:
            path = self._path(name)
            if sid in self._open or path.exists():
                raise PhloemError(ErrorKind.SESSION_EXISTS, f"session {sid!r} already exists")
            marker = self.pending_dir / f"{name}.create"
            try:
                AppendFile(marker, self.sync).close()
                write_atomic(
                    path, header_line(new_header(sid, app, user, own, dict(meta or {}))), self.sync
                )
                remove(marker, self.sync)
            except OSError as exc:
                raise io_error(f"cannot create session {sid!r}", exc) from None
            entry = self._load(sid, name)
            self._scoped(entry, seed, ())
            return entry.session

    def get_session(self, session_id: str) -> Session:
        return self._entry(session_id).session

    def list_sessions(self, app: str, user: str | None = None) -> list[Session]:
        self._check_app(app)
        return [
            self.get_session(info.id) for info in self.infos() if user is None or info.user == user
        ]

    def infos(self) -> list[SessionInfo]:
        """Every session's header facts (no transcript is loaded), oldest first."""
        found = []
        for path in self.sessions_dir.glob("*.jsonl"):
            if path.name.startswith("."):
                continue
            try:
                decode_id(path.stem)
                info = SessionInfo.of(_read_header(path), path)
            except (ValueError, OSError, PhloemError, msgspec.MsgspecError):
                continue  # removed meanwhile, or not ours; `show` reports a corrupt one
            found.append(info)
        return sorted(found, key=lambda i: (i.created, i.id))

    def delete_session(self, session_id: str) -> bool:
        name = encode_id(session_id)
        with self._lock:
            if session_id in self._busy:
                raise PhloemError(ErrorKind.SESSION_BUSY, f"session {session_id!r} has a run")
            path = self._path(name)
            entry = self._open.pop(session_id, None)
            if entry is not None:
                entry.transcript.close()
            if not path.exists():
                return False
            marker = self.pending_dir / f"{name}.delete"
            try:
                AppendFile(marker, self.sync).close()
                remove(path, self.sync)
                remove(marker, self.sync)
            except OSError as exc:
                raise io_error(f"cannot delete session {session_id!r}", exc) from None
            self._warnings.pop(session_id, None)
            return True

    def append_event(self, session: Session, event: Event) -> Event:
        """Record `event` durably, then apply its state changes. Appending the same
        event again is a no-op; the same id with other content is `session_conflict`.
        A `partial` event (a piece of a reply still streaming) is not a commit record:
        it is returned as given and neither written nor applied."""
        if event.partial:
            return event
        if event.content is not None and any(
            p.function_response is not None and p.function_response.raw is not None
            for p in event.content.parts
        ):
            raise PhloemError(
                ErrorKind.INVALID_TOOL_RESULT,
                "a raw tool result (RawToolResult) cannot be stored in a durable session",
            )
        entry = self._entry(session.id)
        if entry.session is not session:
            raise PhloemError(ErrorKind.UNKNOWN_SESSION, f"session {session.id!r} was reloaded")
        stored = persistable(event)
        with entry.lock:
            transcript = entry.transcript
            if transcript.known(stored):
                return stored
            if len(transcript.events) >= self.max_events:
                raise PhloemError(
                    ErrorKind.LIMIT_EXCEEDED,
                    f"session {session.id!r} reached max_events ({self.max_events})",
                )
            actions = event.actions
            self._journals(session, actions.state_delta, actions.state_remove)
            transcript.append(stored)
            session._events.append(stored)
            own = {k: v for k, v in actions.state_delta.items() if _local(k)}
            session._apply(own, [k for k in actions.state_remove if _local(k)])
        return stored

    def end_invocation(self, session: Session) -> None:
        """Drop `temp:` keys: they live for one invocation only."""
        with self._entry(session.id).lock:
            for key in [k for k in session._own if k.startswith(TEMP_PREFIX)]:
                del session._own[key]

    # -- harness extras ----------------------------------------------------------------------

    def header(self, session_id: str) -> Header:
        return self._entry(session_id).transcript.header

    def info(self, session_id: str) -> SessionInfo:
        """One open session's listing facts."""
        return SessionInfo.of(self.header(session_id), self.transcript_path(session_id))

    def transcript_path(self, session_id: str) -> Path:
        return self._path(encode_id(session_id))

    def sidecar(self, session_id: str, kind: str) -> Any:
        entry = self._entry(session_id)
        with entry.lock:
            return entry.transcript.sidecars.get(kind)

    def save_sidecar(self, session_id: str, kind: str, data: Any) -> None:
        entry = self._entry(session_id)
        with entry.lock:
            entry.transcript.save_sidecar(kind, data)

    def warn(self, session_id: str, warning: RunWarning) -> None:
        """Log `warning` and keep it for the session's next `take_warnings`."""
        _log(warning, session=session_id)
        with self._lock:
            self._warnings.setdefault(session_id, Warnings()).add(warning)

    def take_warnings(self, session_id: str) -> tuple[RunWarning, ...]:
        """The warnings collected for `session_id` (and the store's) since the last call."""
        with self._lock:
            own = self._warnings.pop(session_id, None)
        return self._store_warnings.drain() + (own.drain() if own is not None else ())

    def acquire_run(self, session_id: str) -> Session:
        """Take the session's one run slot; `session_busy` if a run holds it."""
        with self._lock:
            session = self.get_session(session_id)
            if session_id in self._busy:
                raise PhloemError(
                    ErrorKind.SESSION_BUSY, f"session {session_id!r} already has an active run"
                )
            self._busy.add(session_id)
            return session

    def release_run(self, session_id: str) -> None:
        with self._lock:
            self._busy.discard(session_id)

    @contextlib.contextmanager
    def run_lease(self, session_id: str) -> Iterator[Session]:
        """Hold the session's one run slot (`session_busy` if taken) while inside."""
        session = self.acquire_run(session_id)
        try:
            yield session
        finally:
            self.release_run(session_id)

    def busy(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._busy

    def event_count(self, info: SessionInfo) -> int | None:
        """How many events the session of `info` holds: counted in memory while it is
        loaded, else read from its transcript's last event line (None: not found)."""
        with self._lock:
            entry = self._open.get(info.id)
        if entry is not None:
            with entry.lock:
                return len(entry.transcript.events)
        return count_events(Path(info.path))

    def close(self) -> None:
        with self._lock:
            for entry in self._open.values():
                entry.transcript.close()
            self._open.clear()
            self._app_journal.close()
            for journal in self._users.values():
                journal.close()
            self._users.clear()
            self._unlock()

    # -- internals ---------------------------------------------------------------------------

    def _check_app(self, app: str) -> None:
        if app != self.app:
            raise PhloemError(
                ErrorKind.INVALID_ARGUMENT, f"this store holds app {self.app!r}, not {app!r}"
            )

    def _path(self, name: str) -> Path:
        return self.sessions_dir / f"{name}.jsonl"

    def _entry(self, session_id: str) -> _Open:
        name = encode_id(session_id)
        with self._lock:
            entry = self._open.get(session_id)
            if entry is not None:
                self._open.move_to_end(session_id)
                return entry
            if not self._path(name).exists():
                raise PhloemError(ErrorKind.UNKNOWN_SESSION, f"no session {session_id!r}")
            return self._load(session_id, name)

    def _load(self, session_id: str, name: str) -> _Open:
        transcript = Transcript.load(self._path(name), self.sync)
        header = transcript.header
        if header.id != session_id:
            transcript.close()
            raise PhloemError(
                ErrorKind.SESSION_CORRUPT,
                f"{transcript.path}:1: the header names session {header.id!r}",
                {"path": str(transcript.path), "line": 1},
            )
        lock = threading.RLock()
        session = Session(
            id=session_id,
            app=self.app,
            user=header.user,
            _app_state=self._app_journal.state,
            _user_state=self._user(header.user).state,
            _lock=lock,
        )
        session._own.update(header.state)
        for event in transcript.events:
            actions = event.actions
            session._apply(
                {k: v for k, v in actions.state_delta.items() if _local(k)},
                [k for k in actions.state_remove if _local(k)],
            )
        session._events.extend(transcript.events)
        for warning in transcript.warnings:
            self.warn(session_id, warning)
        transcript.warnings.clear()
        entry = _Open(session, transcript, lock)
        self._open[session_id] = entry
        self._evict()
        return entry

    def _evict(self) -> None:
        while len(self._open) > self.max_cached:
            victim = next((k for k in self._open if k not in self._busy), None)
            if victim is None:
                return
            self._open.pop(victim).transcript.close()

    def _journals(self, session: Session, delta: Mapping[str, Any], removed: Any) -> None:
        for prefix, journal in (
            (APP_PREFIX, self._app_journal),
            (USER_PREFIX, self._user(session.user)),
        ):
            changes = {k: v for k, v in delta.items() if k.startswith(prefix)}
            gone = [k for k in removed if k.startswith(prefix)]
            if changes or gone:
                try:
                    journal.apply(changes, gone)
                except OSError as exc:
                    raise io_error(f"cannot write {journal.journal_path}", exc) from None

    def _scoped(self, entry: _Open, seed: dict[str, Any], removed: Any) -> None:
        self._journals(entry.session, seed, removed)

    def _unlock(self) -> None:
        self._store_lock.release()


def _log(warning: RunWarning, **fields: str) -> None:
    log.warning(
        warning.code, path=warning.path, line=warning.line, detail=warning.message, **fields
    )


def _local(key: str) -> bool:
    """A key kept in the session itself (session keys and, in memory only, `temp:`)."""
    return scope_of(key) in ("session", "temp")


def _read_header(path: Path) -> Header:
    with open(path, "rb") as handle:
        first = handle.readline(1024 * 1024)
    if not first.endswith(b"\n"):
        raise PhloemError(ErrorKind.SESSION_CORRUPT, f"{path}:1: torn header")
    check_json_depth(first)  # a `ValueError` like msgspec's own refusals
    value = msgspec.json.decode(first)
    if not isinstance(value, dict) or value.get("type") != "header":
        raise PhloemError(ErrorKind.SESSION_CORRUPT, f"{path}:1: not a session header")
    fields = {k: v for k, v in value.items() if k not in ("type", "version")}
    return msgspec.convert(fields, Header)


def _has_header(path: Path) -> bool:
    try:
        _read_header(path)
    except (OSError, ValueError, PhloemError, msgspec.DecodeError, msgspec.ValidationError):
        return False
    return True


__all__ = ["DurableSessionService", "SessionInfo", "read_jsonl", "sync_dir"]
