"""A framed msgpack channel over a Unix stream socket: request/reply with a process child.

Each frame (`phloem.protocols.framing`) is a 4-byte big-endian length followed by one
msgpack value (msgspec). A frame is never larger than `MAX_FRAME_BYTES`: sending one is
refused before a byte is written, and receiving a header that announces one breaks the
channel (the stream cannot be resynchronised) — both raise `FrameTooLarge`, so neither
side waits forever. Every wait has a timeout. Errors by cause::

    ChannelError (PhloemError)
    ├── ChannelClosed    the peer went away, or this end was closed
    ├── ChannelTimeout   nothing arrived (or could be sent) in time
    ├── FrameTooLarge    a frame over the size limit, on either side
    └── BadFrame         a frame that is not valid msgpack (the channel stays usable)
"""

from __future__ import annotations

import contextlib
import math
import select
import socket
import time
from _thread import allocate_lock
from typing import Any

import msgspec

from phloem.protocols import framing
from phloem.protocols.errors import PhloemError
from phloem.protocols.limits import check_range

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest payload of one frame, in bytes (the 4-byte header not counted)."""
MIN_FRAME_BYTES = 64
"""Smallest accepted `max_frame_bytes` for a channel (tests use small limits)."""
RECV_CHUNK_BYTES = 256 * 1024
"""Bytes asked of the kernel per read once a frame's size is known to be large."""

_POLL_IN = select.POLLIN | select.POLLPRI
_POLL_OUT = select.POLLOUT


class ChannelError(PhloemError):
    """Base of the channel errors; `kind` says which."""


class ChannelClosed(ChannelError):
    def __init__(self, message: str = "channel closed") -> None:
        super().__init__("channel_closed", message)


class ChannelTimeout(ChannelError):
    def __init__(self, message: str) -> None:
        super().__init__("channel_timeout", message)


class FrameTooLarge(ChannelError, framing.FrameTooLarge):
    """`framing.FrameTooLarge` on a channel (`size`, `limit`), also a `ChannelError`."""


class BadFrame(ChannelError):
    def __init__(self, message: str) -> None:
        super().__init__("bad_frame", f"frame is not valid msgpack: {message}")


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    return time.monotonic() + check_range("timeout", timeout, 0, None, integer=False)


def _remaining_ms(deadline: float | None) -> int | None:
    if deadline is None:
        return None
    return max(0, math.ceil((deadline - time.monotonic()) * 1000))


class Channel:
    """One end of a framed msgpack channel; thread-safe (one sender and one receiver at a time).

    Values are anything msgspec's msgpack encoder accepts (dicts, lists, str, bytes,
    numbers, bools, None, msgspec Structs); they arrive as plain msgpack values.
    """

    def __init__(self, sock: socket.socket, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        check_range("max_frame_bytes", max_frame_bytes, MIN_FRAME_BYTES, MAX_FRAME_BYTES)
        sock.setblocking(False)
        self._sock: socket.socket | None = sock
        self._fd = sock.fileno()
        self.max_frame_bytes = max_frame_bytes
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder()
        # `_thread` locks: importing `threading` would slow every fork of the fork server.
        self._send_lock = allocate_lock()
        self._recv_lock = allocate_lock()
        self._frames = framing.FrameDecoder(max_frame_bytes)
        self._eof = False  # no more bytes will arrive; frames already buffered still count
        self._broken: ChannelError | None = None  # receiving is impossible from now on
        self._send_buf = bytearray()
        self._send_broken: ChannelError | None = None  # a frame was cut short: no more sends

    # -- sending -------------------------------------------------------------------------

    def send(self, obj: Any, timeout: float | None = None) -> None:
        """Send one value; `FrameTooLarge` if it encodes to more than `max_frame_bytes`.

        Waits at most `timeout` seconds for the peer to make room (None: no limit).
        """
        deadline = _deadline(timeout)
        with self._send_lock:
            if self._send_broken is not None:
                raise self._send_broken
            buf = self._send_buf
            buf.clear()
            buf.extend(bytes(framing.HEADER_BYTES))
            try:
                self._encoder.encode_into(obj, buf, framing.HEADER_BYTES)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ChannelError("unencodable", f"value cannot be sent: {exc}") from None
            try:
                framing.seal(buf, self.max_frame_bytes)
            except framing.FrameTooLarge as exc:
                self._shrink_send_buf()
                raise FrameTooLarge(exc.size, exc.limit) from None
            try:
                self._send_all(buf, deadline)
            finally:
                self._shrink_send_buf()

    def _shrink_send_buf(self) -> None:
        if len(self._send_buf) > RECV_CHUNK_BYTES:
            self._send_buf = bytearray()

    def _send_all(self, data: bytearray, deadline: float | None) -> None:
        sock = self._sock
        if sock is None:
            raise ChannelClosed()
        view = memoryview(data)
        try:
            while view:
                try:
                    sent = sock.send(view)
                except BlockingIOError:
                    sent = 0
                except (BrokenPipeError, ConnectionResetError, OSError) as exc:
                    raise ChannelClosed(f"channel closed: {exc.strerror or exc}") from None
                view = view[sent:]
                if view and not self._wait(_POLL_OUT, deadline):
                    if len(view) == len(data):
                        raise ChannelTimeout("timed out sending a frame")
                    # Part of the frame is out: the stream cannot carry another one. End
                    # our direction, so the peer sees the channel close instead of waiting.
                    self._send_broken = ChannelClosed("a frame was cut short by a send timeout")
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_WR)
                    raise ChannelTimeout("timed out sending a frame; sending is now closed")
        finally:
            view.release()

    # -- receiving -----------------------------------------------------------------------

    def recv(self, timeout: float | None = None) -> Any:
        """The next value; waits at most `timeout` seconds (None: no limit)."""
        deadline = _deadline(timeout)
        with self._recv_lock:
            while True:
                frame = self._next_frame()
                if frame is not None:
                    return frame[0]
                if self._eof:
                    self._broken = self._broken or ChannelClosed("peer closed the channel")
                    raise self._broken
                if not self._wait(_POLL_IN, deadline):
                    raise ChannelTimeout("timed out waiting for a frame")
                self._fill()

    def recv_nowait(self) -> Any:
        """The next value if one has fully arrived; `ChannelTimeout` otherwise."""
        return self.recv(0)

    def request(self, obj: Any, timeout: float | None = None) -> Any:
        """Send `obj` and wait for the next value (the reply), both within `timeout`."""
        deadline = _deadline(timeout)
        self.send(obj, timeout)
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.recv(remaining)

    def _next_frame(self) -> tuple[Any] | None:
        """Decode one complete frame from the buffer (a 1-tuple), or None if incomplete."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._frames.decode_next(self._decoder.decode)
        except framing.FrameTooLarge as exc:
            self._broken = FrameTooLarge(exc.size, exc.limit)
            self._shutdown()
            with self._send_lock:
                self._close_socket()
            raise self._broken from None
        except msgspec.DecodeError as exc:
            raise BadFrame(str(exc)) from None

    def _fill(self) -> None:
        """Read what the kernel has (at least one byte unless EOF)."""
        sock = self._sock
        if sock is None:
            self._eof = True
            return
        want = max(RECV_CHUNK_BYTES, self._frames.missing)
        try:
            data = sock.recv(want)
        except BlockingIOError:
            return
        except (ConnectionResetError, OSError):
            data = b""
        if not data:
            self._eof = True
            return
        self._frames.append(data)

    def _wait(self, events: int, deadline: float | None) -> bool:
        """Poll the socket; False if the deadline passed first."""
        poller = select.poll()
        poller.register(self._fd, events)
        while True:
            if poller.poll(_remaining_ms(deadline)):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    # -- closing -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._sock is None

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        """Close this end; the peer sees `ChannelClosed` once it has read what was sent."""
        self._shutdown()
        with self._recv_lock, self._send_lock:
            self._eof = True
            self._broken = self._broken or ChannelClosed()
            self._close_socket()

    def finish(self, lock_timeout: float = 1.0) -> None:
        """The peer is gone: keep the frames it already sent (readable with `recv`) and
        release the socket. Frames beyond one `max_frame_bytes` of backlog are dropped."""
        self._shutdown()
        if not self._recv_lock.acquire(timeout=lock_timeout):
            return  # a reader is still busy; it will see EOF and the socket is closed later
        try:
            sock = self._sock
            limit = self.max_frame_bytes + framing.HEADER_BYTES
            while sock is not None and self._frames.buffered <= limit:
                try:
                    data = sock.recv(RECV_CHUNK_BYTES)
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                self._frames.append(data)
            self._eof = True
            with self._send_lock:
                self._close_socket()
        finally:
            self._recv_lock.release()

    def _shutdown(self) -> None:
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __repr__(self) -> str:
        state = "closed" if self._sock is None else f"fd {self._fd}"
        return f"<Channel {state}, {self._frames.buffered} bytes buffered>"
