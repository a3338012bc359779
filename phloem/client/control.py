"""Start, stop and restart children by tree path, and read the daemon's recent log lines.

`Client.stop_child("planning/service")` and the others follow supervisorctl's words and
reach the daemon's tree directly (`phloem.supervision.control`); each returns the
`ChildControlled` saying what changed. `logs(path, since)` answers from the daemon's ring
buffer of recent lines per child; `follow_logs` also opens a stream of later lines.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.client.base import ClientBase, EventStream, decode_as
from phloem.protocols.credit import CreditWindow
from phloem.protocols.logs import LogLine, LogsQuery, LogsReply
from phloem.protocols.wire import CHILD_OP, ChildControlled

FOLLOW_WINDOW = CreditWindow(256, 1024 * 1024)
"""The credit a follower of the log grants: lines past it wait in the daemon (bounded)."""


class ControlMethods(ClientBase):
    """Per-child control and log lines (mixed into `phloem.Client`)."""

    def _control(self, action: str, path: str, timeout: float | None) -> ChildControlled:
        body = self._transport.request(action + CHILD_OP, path, b"", timeout)
        result: ChildControlled = decode_as(body, ChildControlled)
        return result

    def start_child(self, path: str, *, timeout: float | None = None) -> ChildControlled:
        """Start the stopped child at `path` (`already_started` if it runs)."""
        return self._control("start", path, timeout)

    def stop_child(self, path: str, *, timeout: float | None = None) -> ChildControlled:
        """Stop the child at `path`; a kept child stays stopped until started."""
        return self._control("stop", path, timeout)

    def restart_child(self, path: str, *, timeout: float | None = None) -> ChildControlled:
        """Stop the child at `path` if it runs, then start it again."""
        return self._control("restart", path, timeout)

    def logs(self, path: str = "", since: float | None = None) -> LogsReply:
        """The daemon's kept log lines of `path` and below it, made at or after `since`
        (seconds since the epoch), oldest first."""
        return self._logs(path, LogsQuery(since, False))

    def follow_logs(
        self, path: str = "", since: float | None = None
    ) -> tuple[LogsReply, EventStream[LogLine]]:
        """The kept lines (as `logs`) and a stream of every later line of `path`."""
        reply = self._logs(path, LogsQuery(since, True))
        assert reply.stream is not None
        stream: EventStream[Any] = self.subscribe(reply.stream, FOLLOW_WINDOW, event_type=LogLine)
        return reply, stream

    def _logs(self, path: str, query: LogsQuery) -> LogsReply:
        body = self._transport.request("logs", path, msgspec.msgpack.encode(query), None)
        result: LogsReply = decode_as(body, LogsReply)
        return result
