"""Each session's most recent warnings, for `session_show` (a snapshot, never drained).

A turn's warnings go back once, in its `AskResult`; the sessions service also keeps the
last `MAX_KEPT_WARNINGS` of each session here (oldest dropped first), for at most
`MAX_WARNING_SESSIONS` sessions (the least recently warned forgotten first), so a client
can ask what a session has warned about without having kept every result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable

from phloem.protocols.warnings import RunWarning

MAX_KEPT_WARNINGS = 256  # a session's most recent warnings kept
MAX_WARNING_SESSIONS = 1_024  # sessions whose recent warnings stay in memory


class RecentWarnings:
    """Bounded per-session warning history (thread-safe)."""

    def __init__(
        self, per_session: int = MAX_KEPT_WARNINGS, sessions: int = MAX_WARNING_SESSIONS
    ) -> None:
        self.per_session = per_session
        self.sessions = sessions
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, deque[RunWarning]] = OrderedDict()

    def add(self, session_id: str, warnings: Iterable[RunWarning]) -> None:
        items = list(warnings)
        if not items:
            return
        with self._lock:
            kept = self._kept.pop(session_id, None) or deque(maxlen=self.per_session)
            kept.extend(items)
            self._kept[session_id] = kept
            while len(self._kept) > self.sessions:
                self._kept.popitem(last=False)

    def snapshot(self, session_id: str) -> list[RunWarning]:
        """A copy of the session's kept warnings, oldest first."""
        with self._lock:
            return list(self._kept.get(session_id, ()))

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._kept.pop(session_id, None)
