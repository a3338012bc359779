"""The daemon's recent log lines, as `phloem logs` and `Client.logs()` receive them.

Every record the daemon logs (one JSON line on stderr) is also kept, bounded, in its
ring buffer of recent lines per child (`phloem.base.logbuffer`), attributed to the actor
path that made it (`actor`, empty for the daemon's own lines outside any actor).
"""

from __future__ import annotations

import msgspec


class LogsQuery(msgspec.Struct, frozen=True):
    """What a client transport is asked for with op `logs` (the path goes as its actor)."""

    since: float | None = None
    follow: bool = False


class LogLine(msgspec.Struct, frozen=True):
    """One kept record: `seq` orders lines across children; `line` is the record as one
    JSON object (cut to `MAX_LOG_LINE_BYTES`, `cut` bytes dropped from its end)."""

    seq: int
    at: float
    actor: str
    level: str
    event: str
    line: str
    cut: int = 0


class LogsReply(msgspec.Struct, frozen=True):
    """The kept lines asked for, oldest first; with `follow`, the stream (owned by the
    caller) on which later lines arrive, each a `LogLine`."""

    lines: list[LogLine]
    stream: str | None = None
    children_dropped: int = 0  # children whose lines were dropped (over MAX_LOG_CHILDREN)
    omitted: int = 0  # older matching lines left out to keep the reply in MAX_LOG_REPLY_BYTES
