"""Connections before their hello, served by the accept loop without a thread each.

An accepted connection first waits here, in a budget of its own
(`daemon.max_pending_handshakes`) that does not count against `max_connections`. Its
first frame is read without blocking as it arrives (at most `MAX_HELLO_BYTES` of it); a
valid hello hands the socket, with whatever was read past the hello, to a `Connection`
on the connection loop. A connection that sends anything else, or nothing within
`handshake_timeout_s`, gets one error frame and is closed.

When the budget is full, the oldest waiting connection is dropped with
`too_many_connections` to make room. Connections that never say hello (slowloris) thus
only ever push out their own kind: a real client sends its hello right after
connecting, and is promoted as soon as it is read — before a drop, the oldest
connection's input is read once more, so a hello that just arrived is never dropped.

Refused connections (a peer uid that is not allowed, `max_connections` reached, a bad
first frame, a timeout) are closed here too, in the same budget and without a thread:
the error frame, a half-close, then up to `CLOSE_DRAIN_BYTES` of the peer's input read and
dropped within `CLOSE_FLUSH_TIMEOUT_S`, so that closing does not reset the connection
before the peer has read why.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import selectors
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phloem.base.logs import get_logger
from phloem.daemon.connection import CLOSE_DRAIN_BYTES, CLOSE_FLUSH_TIMEOUT_S, RECV_BYTES
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.wire import (
    SUPPORTED_VERSIONS,
    FrameReader,
    Hello,
    decode_client,
    error_frame,
)

if TYPE_CHECKING:
    from phloem.daemon.server import Server

log = get_logger("phloem.daemon")

MAX_HELLO_BYTES = 4096  # read before a hello at most; the hello must fit
FULL_LOG_EVERY_S = 10.0  # `handshake_budget_full` is logged at most this often


@dataclass(eq=False)
class _Pending:
    sock: socket.socket
    peer: tuple[int, int, int]
    deadline: float
    frames: FrameReader | None  # None once refused: closing, its input drained
    drained: int = 0


class Handshakes:
    """The accept loop's connections that have not said hello yet (or are being refused).

    Not thread-safe: only the accept loop uses it. `selector` is the accept loop's; each
    waiting socket is registered with its `_Pending` as data, for `on_ready`.
    """

    def __init__(self, server: Server, selector: selectors.BaseSelector) -> None:
        self._server = server
        self._sel = selector
        cfg = server.config.daemon
        self._budget = cfg.max_pending_handshakes
        self._timeout_s = cfg.handshake_timeout_s
        self._max_frame_bytes = cfg.max_frame_bytes
        self._waiting: dict[int, _Pending] = {}  # by fd, oldest first
        self._deadlines: list[tuple[float, int, _Pending]] = []
        self._seq = itertools.count()
        self._dropped = 0  # dropped since the last `handshake_budget_full` line
        self._full_logged_at = -FULL_LOG_EVERY_S

    # -- entering ------------------------------------------------------------------------

    def add(self, sock: socket.socket, peer: tuple[int, int, int]) -> None:
        """A newly accepted connection: wait for its hello (read at once if it is there)."""
        pending = self._enter(sock, peer, time.monotonic() + self._timeout_s)
        if pending is not None:
            pending.frames = FrameReader(self._max_frame_bytes)
            self._read_hello(pending)

    def refuse(self, sock: socket.socket, kind: str, message: str) -> None:
        """Send one error frame to a newly accepted connection, then close it gently."""
        pending = self._enter(sock, (0, 0, 0), time.monotonic() + CLOSE_FLUSH_TIMEOUT_S)
        if pending is not None:
            self._refuse(pending, kind, message)

    def _enter(
        self, sock: socket.socket, peer: tuple[int, int, int], deadline: float
    ) -> _Pending | None:
        try:
            sock.setblocking(False)
            fd = sock.fileno()
        except OSError:
            sock.close()
            return None
        while len(self._waiting) >= self._budget:
            self._drop_oldest()
        pending = _Pending(sock, peer, deadline, None)
        self._waiting[fd] = pending
        self._sel.register(sock, selectors.EVENT_READ, pending)
        self._set_deadline(pending, deadline)
        return pending

    def _drop_oldest(self) -> None:
        oldest = next(iter(self._waiting.values()))
        if oldest.frames is not None:
            self._read_hello(oldest)  # its hello may have just arrived
            if self._waiting.get(_fd(oldest)) is not oldest:
                return  # promoted (or gone): room made
        if oldest.frames is not None:
            limit = self._budget
            with contextlib.suppress(OSError):
                oldest.sock.send(
                    error_frame(
                        ErrorKind.TOO_MANY_CONNECTIONS,
                        f"max_pending_handshakes ({limit}) reached: the oldest connection "
                        "without a hello is dropped",
                    )
                )
            self._dropped += 1
            now = time.monotonic()
            if now - self._full_logged_at >= FULL_LOG_EVERY_S:  # not one line per drop
                log.warning("handshake_budget_full", limit=limit, dropped=self._dropped)
                self._full_logged_at = now
                self._dropped = 0
        self._close(oldest)

    # -- the accept loop's calls ---------------------------------------------------------

    def on_ready(self, pending: _Pending) -> None:
        """The selector found `pending`'s socket readable."""
        if self._waiting.get(_fd(pending)) is not pending:
            return
        if pending.frames is None:
            self._drain(pending)
        else:
            self._read_hello(pending)

    def next_deadline(self) -> float | None:
        """Seconds until the earliest deadline (None: nothing is waiting)."""
        heap = self._deadlines
        while heap and not self._current(heap[0]):
            heapq.heappop(heap)
        return max(0.0, heap[0][0] - time.monotonic()) if heap else None

    def expire(self) -> None:
        """Refuse the connections whose hello is late; close those done draining."""
        now = time.monotonic()
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if not self._current(entry):
                continue
            pending = entry[2]
            if pending.frames is None:
                self._close(pending)
            else:
                self._refuse(pending, ErrorKind.TIMEOUT, "no hello within handshake_timeout_s")

    def close_all(self) -> None:
        for pending in list(self._waiting.values()):
            self._close(pending)

    # -- reading the hello ---------------------------------------------------------------

    def _read_hello(self, pending: _Pending) -> None:
        frames = pending.frames
        assert frames is not None
        try:
            data = pending.sock.recv(MAX_HELLO_BYTES - frames.buffered)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(pending)
            return
        if not data:
            if frames.partial:
                self._refuse(
                    pending, ErrorKind.BAD_FRAME, "truncated frame: connection closed mid-frame"
                )
            else:
                self._close(pending)
            return
        frames.append(data)
        try:
            first = frames.next_frame()  # the frames behind it stay for the connection
        except PhloemError as err:  # a header over max_frame_bytes
            self._refuse(pending, err.kind, err.message)
            return
        if first is None:
            if frames.buffered >= MAX_HELLO_BYTES:
                self._refuse(
                    pending, ErrorKind.BAD_FRAME, f"no hello in the first {MAX_HELLO_BYTES} bytes"
                )
            return
        self._greet(pending, first, frames)

    def _greet(self, pending: _Pending, first: bytes, frames: FrameReader) -> None:
        try:
            hello = decode_client(first)
        except PhloemError as err:
            if err.kind == ErrorKind.BAD_FRAME:
                self._refuse(pending, err.kind, err.message)
                return
            hello = None  # a request refused for its own id: still not a hello
        if not isinstance(hello, Hello):
            self._refuse(pending, ErrorKind.BAD_FRAME, "the first frame must be a hello")
            return
        if hello.version not in SUPPORTED_VERSIONS:
            self._refuse(
                pending,
                ErrorKind.UNSUPPORTED_VERSION,
                f"protocol version {hello.version} is not supported "
                f"(supported: {sorted(SUPPORTED_VERSIONS)})",
            )
            return
        if not self._server.has_room():
            limit = self._server.config.daemon.max_connections
            self._refuse(
                pending, ErrorKind.TOO_MANY_CONNECTIONS, f"max_connections ({limit}) reached"
            )
            return
        self._forget(pending)
        self._server.start_connection(pending.sock, pending.peer, frames)  # non-blocking

    # -- refusing and closing ------------------------------------------------------------

    def _refuse(self, pending: _Pending, kind: str, message: str) -> None:
        pending.frames = None
        with contextlib.suppress(OSError):
            pending.sock.send(error_frame(kind, message))  # a fresh socket has room for it
            pending.sock.shutdown(socket.SHUT_WR)
        self._set_deadline(pending, time.monotonic() + CLOSE_FLUSH_TIMEOUT_S)
        self._drain(pending)

    def _drain(self, pending: _Pending) -> None:
        while pending.drained < CLOSE_DRAIN_BYTES:
            try:
                data = pending.sock.recv(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                break
            if not data:
                break
            pending.drained += len(data)
        self._close(pending)

    def _close(self, pending: _Pending) -> None:
        if self._forget(pending):
            pending.sock.close()

    def _forget(self, pending: _Pending) -> bool:
        fd = _fd(pending)
        if self._waiting.get(fd) is not pending:
            return False
        del self._waiting[fd]
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(pending.sock)
        return True

    def _set_deadline(self, pending: _Pending, deadline: float) -> None:
        pending.deadline = deadline
        heap = self._deadlines
        heapq.heappush(heap, (deadline, next(self._seq), pending))
        if len(heap) > 4 * len(self._waiting) + 64:  # mostly stale: keep it bounded
            self._deadlines = [e for e in heap if self._current(e)]
            heapq.heapify(self._deadlines)

    def _current(self, entry: tuple[float, int, _Pending]) -> bool:
        deadline, _, pending = entry
        return pending.deadline == deadline and self._waiting.get(_fd(pending)) is pending


def _fd(pending: _Pending) -> int:
    return pending.sock.fileno()
