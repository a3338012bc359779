"""The socket transport: one connection to a phloem daemon, requests pipelined over it.

One transport may be used from several threads: requests are pipelined over the one
connection, and whichever thread is waiting reads replies for everyone (no extra reader
thread, so a round trip costs one wake-up per direction). Each connection is its own
owner: refs and streams it opens are cancelled when it closes or drops.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from phloem.client.base import StreamSource, trace_context
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.wire import (
    DEFAULT_MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Ask,
    Credit,
    Event,
    Fail,
    FrameReader,
    GetStatus,
    GetTree,
    Hello,
    Ping,
    Reply,
    StopDaemon,
    StreamEnd,
    Subscribe,
    Tell,
    Unsubscribe,
    Welcome,
    decode_server,
    encode_frame,
)

DEFAULT_CONNECT_TIMEOUT_S = 5.0
REPLY_GRACE_S = 5.0  # how long past the daemon's own deadline a client waits for a reply
RECV_BYTES = 64 * 1024  # below malloc's mmap threshold: a bigger read buffer costs an mmap per read
DEFAULT_REQUEST_TIMEOUT_S = 30.0


def no_daemon_error(path: Path | str) -> PhloemError:
    return PhloemError(
        ErrorKind.NO_DAEMON,
        f"no phloem daemon at {path} (start one with `phloem daemon --config ...`)",
    )


# --- socket transport -------------------------------------------------------------------


class SocketTransport:
    """A connection to a daemon. Thread-safe; reading is done by whichever caller waits."""

    def __init__(self, sock: socket.socket, path: Path) -> None:
        self._sock = sock
        self.path = path
        self._wlock = threading.Lock()
        self._cond = threading.Condition()
        self._reading = False
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        self._frames = FrameReader(DEFAULT_MAX_FRAME_BYTES)
        self._ids = itertools.count(1)
        self._waiting: set[int] = set()
        self._results: dict[int, Reply | Fail] = {}
        self._pending_subs: dict[int, RemoteStream] = {}
        self._subs: dict[int, RemoteStream] = {}
        self._error: PhloemError | None = None
        self._closed = False
        self.welcome: Welcome | None = None
        self.request_timeout_s = DEFAULT_REQUEST_TIMEOUT_S

    @classmethod
    def connect(cls, path: Path, timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> SocketTransport:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.settimeout(None)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            sock.close()
            raise no_daemon_error(path) from exc
        except PermissionError as exc:
            sock.close()
            raise PhloemError(
                ErrorKind.PERMISSION_DENIED, f"cannot connect to {path}: {exc}"
            ) from exc
        except TimeoutError as exc:
            sock.close()
            raise PhloemError(ErrorKind.TIMEOUT, f"connecting to {path} timed out") from exc
        except OSError as exc:
            sock.close()
            raise PhloemError(
                ErrorKind.CONNECTION_LOST, f"cannot connect to {path}: {exc}"
            ) from exc
        transport = cls(sock, path)
        try:
            transport._handshake(timeout)
        except BaseException:
            transport.close()
            raise
        return transport

    def _handshake(self, timeout: float) -> None:
        self._send(Hello(version=PROTOCOL_VERSION, client=f"phloem-python/{os.getpid()}"))
        deadline = time.monotonic() + timeout
        with self._cond:
            self._pump(lambda: self.welcome is not None, deadline)
        assert self.welcome is not None
        self._frames.max_frame_bytes = max(self.welcome.max_frame_bytes, 1024)
        self.request_timeout_s = self.welcome.request_timeout_s

    # -- io ------------------------------------------------------------------------------

    def _send(self, message: Any) -> None:
        frame = encode_frame(message)
        with self._wlock:
            if self._closed:
                raise PhloemError(ErrorKind.CLOSED, "the client is closed")
            try:
                self._sock.sendall(frame)
            except OSError as exc:
                raise self._lost(f"send failed: {exc}") from exc

    def _lost(self, why: str) -> PhloemError:
        err = PhloemError(ErrorKind.CONNECTION_LOST, f"connection to {self.path} lost: {why}")
        with self._cond:
            if self._error is None:
                self._error = err
            self._cond.notify_all()
            return self._error

    def _read(self, timeout: float | None) -> list[bytes]:
        """One read (waiting up to `timeout`); the complete frames it yields."""
        ms = None if timeout is None else max(0, int(timeout * 1000) + 1)
        if not self._poller.poll(ms):
            return []
        try:
            data = self._sock.recv(RECV_BYTES)
        except OSError as exc:
            raise PhloemError(ErrorKind.CONNECTION_LOST, f"receive failed: {exc}") from exc
        if not data:
            raise PhloemError(
                ErrorKind.CONNECTION_LOST, f"the daemon at {self.path} closed the connection"
            )
        return self._frames.feed(data)

    def _pump(self, done: Callable[[], bool], deadline: float | None) -> None:
        """With `_cond` held: wait until `done()`, reading frames if nobody else is."""
        while not done():
            if self._error is not None:
                raise self._error
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise PhloemError(ErrorKind.TIMEOUT, "no reply from the daemon in time")
            if self._reading:
                self._cond.wait(remaining)
                continue
            self._reading = True
            self._cond.release()
            frames: list[bytes] = []
            error: PhloemError | None = None
            try:
                frames = self._read(remaining)
            except PhloemError as exc:
                error = exc
            finally:
                self._cond.acquire()
                self._reading = False
            for frame in frames:
                self._dispatch(frame)
            if error is not None and self._error is None:
                self._error = error
            self._cond.notify_all()

    def _dispatch(self, frame: bytes) -> None:
        try:
            message = decode_server(frame)
        except PhloemError as err:
            self._error = err
            return
        if isinstance(message, Reply | Fail):
            rid = message.id
            if rid is None:
                assert isinstance(message, Fail)
                self._error = PhloemError.from_value(message.error)
                return
            stream = self._pending_subs.pop(rid, None)
            if stream is not None and isinstance(message, Reply):
                sub_id = msgspec.msgpack.decode(message.body, type=int)
                stream.sub = sub_id
                self._subs[sub_id] = stream
            if rid in self._waiting:
                self._results[rid] = message
        elif isinstance(message, Event):
            stream = self._subs.get(message.sub)
            if stream is not None:
                stream._buffer.append(bytes(message.body))
                if len(stream._buffer) > stream.window.messages:
                    self._error = PhloemError(
                        ErrorKind.BAD_FRAME, "the daemon sent beyond the granted credit"
                    )
        elif isinstance(message, StreamEnd):
            stream = self._subs.pop(message.sub, None)
            if stream is not None:
                stream._end = (message.kind, message.detail)
        elif isinstance(message, Welcome):
            self.welcome = message

    # -- Transport -----------------------------------------------------------------------

    def request(self, op: str, actor: str, body: bytes, timeout: float | None) -> bytes:
        rid = next(self._ids)
        wait: float | None
        if op == "ask":
            trace = trace_context()
            message: Any = Ask(rid, actor, msgspec.Raw(body), timeout, trace)
            wait = (timeout if timeout is not None else self.request_timeout_s) + REPLY_GRACE_S
        elif op == "tell":
            trace = trace_context()
            message = Tell(rid, actor, msgspec.Raw(body), trace)
            wait = self.request_timeout_s + REPLY_GRACE_S
        else:
            factory = {"status": GetStatus, "tree": GetTree, "stop": StopDaemon, "ping": Ping}
            if op not in factory:
                raise ValueError(f"unknown op {op!r}")
            message = factory[op](rid)
            wait = (timeout if timeout is not None else self.request_timeout_s) + REPLY_GRACE_S
        return self._roundtrip(rid, message, wait)

    def _roundtrip(self, rid: int, message: Any, wait: float | None) -> bytes:
        with self._cond:
            if self._error is not None:
                raise self._error
            self._waiting.add(rid)
        try:
            self._send(message)
            deadline = None if wait is None else time.monotonic() + wait
            with self._cond:
                self._pump(lambda: rid in self._results, deadline)
                result = self._results.pop(rid)
        finally:
            with self._cond:
                self._waiting.discard(rid)
                self._results.pop(rid, None)
                self._pending_subs.pop(rid, None)
        if isinstance(result, Fail):
            raise PhloemError.from_value(result.error)
        return bytes(result.body)

    def subscribe(self, stream: str, window: CreditWindow) -> StreamSource:
        rid = next(self._ids)
        remote = RemoteStream(self, stream, window)
        with self._cond:
            self._pending_subs[rid] = remote
        message = Subscribe(rid, stream, window.messages, window.bytes)
        self._roundtrip(rid, message, self.request_timeout_s + REPLY_GRACE_S)
        return remote

    def wait_closed(self, timeout: float | None) -> bool:
        """Wait until the daemon closes this connection (after `stop`); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            try:
                self._pump(lambda: False, deadline)
            except PhloemError as err:
                return err.kind == ErrorKind.CONNECTION_LOST
        return False

    def close(self) -> None:
        with self._wlock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with self._cond:
            if self._error is None:
                self._error = PhloemError(ErrorKind.CLOSED, "the client is closed")
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class RemoteStream:
    """A subscription over the socket: buffered events (at most the window) and acks."""

    def __init__(self, transport: SocketTransport, name: str, window: CreditWindow) -> None:
        self._t = transport
        self.name = name
        self.window = window
        self.sub: int | None = None
        self._buffer: deque[bytes] = deque()
        self._end: tuple[str, str | None] | None = None
        self._unacked_msgs = 0
        self._unacked_bytes = 0
        self._batch_msgs = max(1, window.messages // 2)
        self._batch_bytes = max(1, window.bytes // 2)

    def recv(self, timeout: float | None = None) -> bytes:
        t = self._t
        deadline = None if timeout is None else time.monotonic() + timeout
        with t._cond:
            if not self._buffer:
                self._flush()
                try:
                    t._pump(lambda: bool(self._buffer) or self._end is not None, deadline)
                except PhloemError as err:
                    if err.kind == ErrorKind.TIMEOUT:
                        raise PhloemError(
                            ErrorKind.TIMEOUT, f"no event within {timeout} s"
                        ) from err
                    raise
            if not self._buffer:
                assert self._end is not None
                kind, detail = self._end
                if kind == "normal":
                    raise PhloemError(ErrorKind.CLOSED, f"stream {self.name!r} ended")
                raise PhloemError(kind, f"stream {self.name!r} ended: {detail or kind}")
            item = self._buffer.popleft()
            self._unacked_msgs += 1
            self._unacked_bytes += len(item)
            if self._unacked_msgs >= self._batch_msgs or self._unacked_bytes >= self._batch_bytes:
                self._flush()
            return item

    def _flush(self) -> None:
        if self._unacked_msgs and self.sub is not None and self._end is None:
            msgs, nbytes = self._unacked_msgs, self._unacked_bytes
            self._unacked_msgs = self._unacked_bytes = 0
            self._t._send(Credit(self.sub, msgs, nbytes))

    def close(self) -> None:
        sub = self.sub
        if sub is None or self._end is not None or self._t.closed:
            return
        with contextlib.suppress(PhloemError):
            rid = next(self._t._ids)
            self._t._roundtrip(rid, Unsubscribe(rid, sub), REPLY_GRACE_S)
        with self._t._cond:
            self._t._subs.pop(sub, None)
            if self._end is None:
                self._end = ("normal", "unsubscribed")
