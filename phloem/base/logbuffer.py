"""The daemon's ring buffer of recent log lines, per child, for `phloem logs`.

The daemon keeps (`logs.keep_recent`) every record it writes on stderr, attributed to the
actor path that made it (`owners.current_actor_path`), in one bounded buffer: the last
`MAX_LOG_LINES_PER_CHILD` lines of each child, each cut to `MAX_LOG_LINE_BYTES`, for at
most `MAX_LOG_CHILDREN` children (the one that logged least recently is dropped first,
counted in `children_dropped`). Followers (`follow`) are told of each new line as it is
kept, on the logging thread: they must not block (the daemon's publish to a stream under
credit never does). A record made while a follower is being told is kept, not told
again, so a follower that logs cannot loop.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict, deque
from collections.abc import Callable

from phloem.protocols.logs import LogLine

MAX_LOG_LINES_PER_CHILD = 200
"""Lines kept for one child (actor path); older ones are dropped first."""
MAX_LOG_LINE_BYTES = 2_048
"""UTF-8 bytes kept of one line; the rest is cut (`LogLine.cut` says how many)."""
MAX_LOG_CHILDREN = 128
"""Children whose lines are kept; past it the least recently logging child is dropped.
With the two above, the buffer holds at most ~50 MiB of line text (200 lines of 2 KiB
for each of 128 children)."""
MAX_LOG_FOLLOWERS = 64
"""Followers (`phloem logs --follow`) at once; one more is `backpressure`."""

Follower = Callable[[LogLine], None]


class TooManyFollowers(Exception):
    """`MAX_LOG_FOLLOWERS` follow already."""


def cut_line(line: str, limit: int = MAX_LOG_LINE_BYTES) -> tuple[str, int]:
    """`line` cut to `limit` UTF-8 bytes (never mid-character) and the bytes dropped."""
    data = line.encode("utf-8", "replace")
    if len(data) <= limit:
        return line, 0
    kept = data[:limit].decode("utf-8", "ignore")
    return kept, len(data) - len(kept.encode("utf-8"))


def matches(actor: str, path: str) -> bool:
    """Whether a line of `actor` is under `path` (the child itself or below it; every
    line for the empty path)."""
    return not path or actor == path or actor.startswith(path + "/")


class LogBuffer:
    """Recent lines per child, bounded three ways (see the module docstring)."""

    def __init__(
        self,
        lines_per_child: int = MAX_LOG_LINES_PER_CHILD,
        line_bytes: int = MAX_LOG_LINE_BYTES,
        children: int = MAX_LOG_CHILDREN,
        followers: int = MAX_LOG_FOLLOWERS,
    ) -> None:
        self.lines_per_child = lines_per_child
        self.line_bytes = line_bytes
        self.max_children = children
        self.max_followers = followers
        self.children_dropped = 0
        self._lock = threading.Lock()
        self._by_actor: OrderedDict[str, deque[LogLine]] = OrderedDict()
        self._seq = itertools.count(1)
        self._followers: dict[int, Follower] = {}
        self._follower_ids = itertools.count(1)
        self._telling = threading.local()

    def add(self, actor: str, level: str, event: str, at: float, line: str) -> LogLine:
        """Keep one record and tell the followers."""
        text, cut = cut_line(line, self.line_bytes)
        with self._lock:
            kept = LogLine(next(self._seq), at, actor, level, event, text, cut)
            lines = self._by_actor.get(actor)
            if lines is None:
                while len(self._by_actor) >= self.max_children:
                    self._by_actor.popitem(last=False)
                    self.children_dropped += 1
                lines = self._by_actor[actor] = deque(maxlen=self.lines_per_child)
            else:
                self._by_actor.move_to_end(actor)
            lines.append(kept)
            followers = list(self._followers.values()) if self._followers else ()
        if followers and not getattr(self._telling, "on", False):
            self._telling.on = True
            try:
                for tell in followers:
                    try:
                        tell(kept)
                    except Exception:  # a follower's failure is its own, never the logger's
                        continue
            finally:
                self._telling.on = False
        return kept

    def lines(
        self, path: str = "", since: float | None = None, max_bytes: int | None = None
    ) -> list[LogLine]:
        """The kept lines of `path` (and below it) made at or after `since`, oldest first;
        with `max_bytes`, only the newest whose text fits in it."""
        with self._lock:
            chosen = [
                line
                for actor, lines in self._by_actor.items()
                if matches(actor, path)
                for line in lines
                if since is None or line.at >= since
            ]
        chosen.sort(key=lambda line: line.seq)
        if max_bytes is None:
            return chosen
        total, start = 0, len(chosen)
        while start > 0 and total + len(chosen[start - 1].line) <= max_bytes:
            start -= 1
            total += len(chosen[start].line)
        return chosen[start:]

    def children(self) -> list[str]:
        """The children with kept lines, least recently logging first."""
        with self._lock:
            return list(self._by_actor)

    def follow(self, tell: Follower) -> Callable[[], None]:
        """Tell `tell` of every line kept from now on; returns the call that stops it.
        `TooManyFollowers` when `max_followers` follow already."""
        with self._lock:
            if len(self._followers) >= self.max_followers:
                raise TooManyFollowers(f"{self.max_followers} followers of the log already")
            key = next(self._follower_ids)
            self._followers[key] = tell

        def unfollow() -> None:
            with self._lock:
                self._followers.pop(key, None)

        return unfollow
