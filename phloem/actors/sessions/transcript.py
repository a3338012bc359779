"""One session's transcript: a JSONL file that is the commit record of the session.

Line 1 is the header, `{"type": "header", "version": 1, "id", "app", "user", "state",
"incarnation", "created", "meta"}`. Then, in order, `{"type": "event", "order": N,
"event": {...}}` lines (complete events only, `temp:` keys stripped) and
`{"type": "sidecar", "kind": K, "data": {...}}` records (the last one per kind wins).
Records of an unknown type or a newer version are skipped with a warning.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from phloem.agents.events import Event, EventActions
from phloem.agents.session import TEMP_PREFIX
from phloem.base.durablefiles import MAX_LINE_BYTES, AppendFile, corrupt, read_jsonl
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.warnings import RunWarning

VERSION = 1
_encode = msgspec.json.encode
EVENT_LINE_PREFIX = b'{"type":"event","order":'
MAX_COUNT_SCAN_BYTES = 1024 * 1024
"""How far from its end `count_events` reads a transcript for its last event line."""
MAX_ORDER_DIGITS = 19
"""An event order longer than this (beyond 64 bits) is no count (`count_events`: None)."""


class Header(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    app: str
    user: str
    state: dict[str, Any] = {}
    incarnation: str = ""
    created: float = 0.0
    meta: dict[str, Any] = {}


class EventRecord(msgspec.Struct, frozen=True, tag_field="type", tag="event"):
    order: int
    event: Event


_fast = msgspec.json.Decoder(EventRecord)


def _decode_record(line: bytes) -> Any:
    """An event line straight into its struct (the common case); anything else as a
    plain JSON object, for the checks that follow."""
    try:
        return _fast.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        value = msgspec.json.decode(line)
        if not isinstance(value, dict):
            raise ValueError("not an object") from None
        return value


def new_header(
    session_id: str, app: str, user: str, state: dict[str, Any], meta: dict[str, Any]
) -> Header:
    return Header(
        id=session_id,
        app=app,
        user=user,
        state=state,
        incarnation=secrets.token_hex(8),
        created=time.time(),
        meta=meta,
    )


def header_line(header: Header) -> bytes:
    body = msgspec.to_builtins(header)
    return _encode({"type": "header", "version": VERSION, **body}) + b"\n"


def persistable(event: Event) -> Event:
    """`event` as it is stored: `temp:` keys never reach the disk."""
    actions = event.actions
    delta = {k: v for k, v in actions.state_delta.items() if not k.startswith(TEMP_PREFIX)}
    removed = tuple(k for k in actions.state_remove if not k.startswith(TEMP_PREFIX))
    if len(delta) == len(actions.state_delta) and len(removed) == len(actions.state_remove):
        return event
    return msgspec.structs.replace(
        event,
        actions=EventActions(state_delta=delta, state_remove=removed, escalate=actions.escalate),
    )


@dataclass
class Transcript:
    """A loaded transcript, open for appends."""

    path: Path
    header: Header
    events: list[Event] = field(default_factory=list)
    sidecars: dict[str, Any] = field(default_factory=dict)
    warnings: list[RunWarning] = field(default_factory=list)
    _index: dict[str, Event] = field(default_factory=dict)
    _file: AppendFile | None = None

    @classmethod
    def load(cls, path: Path, sync: bool) -> Transcript:
        lines = read_jsonl(path, repair=True, sync=sync, decode=_decode_record)
        if not lines.records:
            raise corrupt(path, 1, "no header")
        number, first = lines.records[0]
        if (
            not isinstance(first, dict)
            or first.get("type") != "header"
            or first.get("version") != VERSION
        ):
            raise corrupt(path, number, "the first line is not a version-1 header")
        try:
            fields = {k: v for k, v in first.items() if k not in ("type", "version")}
            header = msgspec.convert(fields, Header)
        except msgspec.ValidationError as exc:
            raise corrupt(path, number, f"bad header ({exc})") from None
        transcript = cls(path, header)
        if lines.repaired is not None:
            transcript.warnings.append(lines.repaired)
        for number, record in lines.records[1:]:
            transcript._replay(number, record)
        transcript._file = AppendFile(path, sync)
        return transcript

    def _replay(self, number: int, record: Any) -> None:
        if isinstance(record, EventRecord):
            self._add(number, record.order, record.event)
            return
        kind = record.get("type")
        if record.get("version", VERSION) != VERSION or kind not in ("event", "sidecar"):
            self.warnings.append(
                RunWarning.of(
                    "session_record_skipped",
                    f"skipped a record of unknown type {str(kind)[:40]!r} or version",
                    path=str(self.path),
                    line=number,
                )
            )
            return
        if kind == "sidecar":
            sidecar = record.get("kind")
            if not isinstance(sidecar, str):
                raise corrupt(self.path, number, "sidecar without a kind")
            self.sidecars[sidecar] = record.get("data")
            return
        try:
            event = msgspec.convert(record.get("event"), Event)
        except msgspec.ValidationError as exc:
            raise corrupt(self.path, number, f"bad event ({exc})") from None
        self._add(number, record.get("order"), event)

    def _add(self, number: int, order: Any, event: Event) -> None:
        if order != len(self.events) + 1:
            raise corrupt(self.path, number, f"expected event order {len(self.events) + 1}")
        if not event.id or event.id in self._index:
            raise corrupt(self.path, number, "event without an id or with a repeated id")
        self._index[event.id] = event
        self.events.append(event)

    def known(self, event: Event) -> bool:
        """True if this exact event is stored; `session_conflict` if its id is stored
        with other content."""
        known = self._index.get(event.id)
        if known is None:
            return False
        if known is event or _encode(known) == _encode(event):
            return True
        raise PhloemError(
            ErrorKind.SESSION_CONFLICT,
            f"event {event.id!r} is already in session {self.header.id!r} with other content",
        )

    def append(self, event: Event) -> bool:
        """Store `event` durably; False if the same event (same id, same content) is
        already there; `session_conflict` if the id is there with other content."""
        if not event.id:
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, "an event needs an id")
        if self.known(event):
            return False
        body = _encode(event)
        order = len(self.events) + 1
        line = EVENT_LINE_PREFIX + b'%d,"event":' % order + body + b"}\n"
        self._write(line)
        self._index[event.id] = event
        self.events.append(event)
        return True

    def save_sidecar(self, kind: str, data: Any) -> None:
        self._write(_encode({"type": "sidecar", "kind": kind, "data": data}) + b"\n")
        self.sidecars[kind] = data

    def _write(self, line: bytes) -> None:
        if len(line) > MAX_LINE_BYTES:
            raise PhloemError(
                ErrorKind.LIMIT_EXCEEDED, f"a session record is over {MAX_LINE_BYTES} bytes"
            )
        if self._file is None:
            raise PhloemError(ErrorKind.CLOSED, f"transcript {self.path} is closed")
        try:
            self._file.append(line)
        except OSError as exc:
            raise PhloemError(
                ErrorKind.SESSION_IO, f"cannot append to {self.path}: {exc}"
            ) from None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def count_events(path: Path, max_bytes: int = MAX_COUNT_SCAN_BYTES) -> int | None:
    """The events in the transcript at `path`, read from the order of its last event line
    within its last `max_bytes` (None: not found there, or the file is unreadable)."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - max_bytes)
            f.seek(start)
            tail = f.read(max_bytes)
    except OSError:
        return None
    at = tail.rfind(b"\n" + EVENT_LINE_PREFIX)
    if at < 0:
        return 0 if start == 0 else None
    digits = tail[at + 1 + len(EVENT_LINE_PREFIX) :].split(b",", 1)[0]
    return int(digits) if digits.isdigit() and len(digits) <= MAX_ORDER_DIGITS else None
