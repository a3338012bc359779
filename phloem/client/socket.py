"""The socket transport: one connection to a phloem daemon, requests pipelined over it.

One transport may be used from several threads: requests are pipelined over the one
connection, and whichever thread is waiting reads replies for everyone (no extra reader
thread, so a round trip costs one wake-up per direction). What is said on the connection
is `ClientProtocol`'s business; this module moves its bytes. Each connection is its own
owner: refs and streams it opens are cancelled when it closes or drops.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from phloem.client.base import StreamSource, decode_as, trace_context
from phloem.client.protocol import (
    DEFAULT_CONNECT_TIMEOUT_S,
    RECV_BYTES,
    Answered,
    ClientProtocol,
    Outgoing,
    Subscription,
    connect_error,
)
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.logs import LogsQuery
from phloem.protocols.wire import CHILD_OP


def connect_unix(path: Path, timeout: float) -> socket.socket:
    """A blocking socket connected to `path` within `timeout` (else `PhloemError`): a
    daemon whose listen backlog is full is waited for (the kernel honours the send timeout
    while it waits for room), where a non-blocking connect would fail at once."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    seconds = max(timeout, 0.001)
    wait = struct.pack("ll", int(seconds), int((seconds % 1) * 1_000_000))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, wait)
        sock.connect(str(path))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))
    except OSError as exc:
        sock.close()
        raise connect_error(path, exc) from exc
    return sock


class SocketTransport:
    """A connection to a daemon. Thread-safe; reading is done by whichever caller waits."""

    def __init__(self, sock: socket.socket, path: Path) -> None:
        self._sock = sock
        self.path = path
        self._wlock = threading.Lock()
        self._cond = threading.Condition()  # guards the protocol and the fields below
        self._reading = False
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        self._proto = ClientProtocol(f"phloem-python/{os.getpid()}")
        self._waiting: set[int] = set()
        self._answers: dict[int, Answered] = {}
        self._closed = False

    @classmethod
    def connect(cls, path: Path, timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> SocketTransport:
        transport = cls(connect_unix(path, timeout), path)
        try:
            transport._handshake(timeout)
        except BaseException:
            transport.close()
            raise
        return transport

    def _handshake(self, timeout: float) -> None:
        self._send(self._proto.hello())
        deadline = time.monotonic() + timeout
        with self._cond:
            self._pump(lambda: self._proto.welcome is not None, deadline)

    # -- io ------------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        if not data:
            return
        with self._wlock:
            if self._closed:
                raise PhloemError(ErrorKind.CLOSED, "the client is closed")
            try:
                self._sock.sendall(data)
            except OSError as exc:
                raise self._lost(f"send failed: {exc}") from exc

    def _lost(self, why: str) -> PhloemError:
        err = PhloemError(ErrorKind.CONNECTION_LOST, f"connection to {self.path} lost: {why}")
        with self._cond:
            self._proto.fail(err)
            self._cond.notify_all()
            assert self._proto.error is not None
            return self._proto.error

    def _read(self, timeout: float | None) -> bytes:
        """One read, waiting up to `timeout` (b"" if nothing came in time)."""
        ms = None if timeout is None else max(0, int(timeout * 1000) + 1)
        if not self._poller.poll(ms):
            return b""
        try:
            data = self._sock.recv(RECV_BYTES)
        except OSError as exc:
            raise PhloemError(ErrorKind.CONNECTION_LOST, f"receive failed: {exc}") from exc
        if not data:
            raise PhloemError(
                ErrorKind.CONNECTION_LOST, f"the daemon at {self.path} closed the connection"
            )
        return data

    def _pump(self, done: Callable[[], bool], deadline: float | None) -> None:
        """With `_cond` held: wait until `done()`, reading frames if nobody else is."""
        proto = self._proto
        while not done():
            proto.check()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise PhloemError(ErrorKind.TIMEOUT, "no reply from the daemon in time")
            if self._reading:
                self._cond.wait(remaining)
                continue
            self._reading = True
            self._cond.release()
            data = b""
            error: PhloemError | None = None
            try:
                data = self._read(remaining)
            except PhloemError as exc:
                error = exc
            finally:
                self._cond.acquire()
                self._reading = False
            for event in proto.receive(data) if data else ():
                if isinstance(event, Answered) and event.rid in self._waiting:
                    self._answers[event.rid] = event
            if error is not None:
                proto.fail(error)
            self._send_queued()
            self._cond.notify_all()

    def _send_queued(self) -> None:
        """Send what the protocol queued itself (credit, unsubscriptions); `_cond` held."""
        data = self._proto.data_to_send()
        if data:
            with contextlib.suppress(PhloemError):  # a lost connection fails the waiters
                self._send(data)

    def _roundtrip(self, make: Callable[[], Outgoing]) -> Answered:
        """Send the request `make()` builds and wait for its answer."""
        with self._cond:
            out = make()
            self._waiting.add(out.rid)
        try:
            self._send(out.frame)
            with self._cond:
                self._pump(lambda: out.rid in self._answers, time.monotonic() + out.wait_s)
                return self._answers.pop(out.rid)
        finally:
            with self._cond:
                self._waiting.discard(out.rid)
                if self._answers.pop(out.rid, None) is None:
                    self._proto.forget(out.rid)

    # -- Transport -----------------------------------------------------------------------

    def request(self, op: str, actor: str, body: bytes, timeout: float | None) -> bytes:
        proto = self._proto
        if op == "ask":
            trace = trace_context()
            answer = self._roundtrip(lambda: proto.ask(actor, body, timeout, trace))
        elif op == "tell":
            trace = trace_context()
            answer = self._roundtrip(lambda: proto.tell(actor, body, trace))
        elif op.endswith(CHILD_OP):  # start_child, stop_child, restart_child; actor: the path
            action = op.removesuffix(CHILD_OP)
            answer = self._roundtrip(lambda: proto.control_child(action, actor, timeout))
        elif op == "logs":  # actor: the tree path; body: a `LogsQuery`
            query = decode_as(body, LogsQuery)
            answer = self._roundtrip(lambda: proto.logs(actor, query.since, query.follow))
        else:  # status, tree, stop, ping
            answer = self._roundtrip(lambda: proto.control(op, timeout))
        return answer.body()

    def subscribe(self, stream: str, window: CreditWindow) -> StreamSource:
        remote = RemoteStream(self, stream, window)
        try:
            self._roundtrip(lambda: self._proto.subscribe(remote)).body()
        except BaseException:
            with self._cond:
                self._proto.abandon(remote)
                self._send_queued()
            raise
        return remote

    def close(self) -> None:
        with self._wlock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with self._cond:
            self._proto.fail(PhloemError(ErrorKind.CLOSED, "the client is closed"))
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class RemoteStream(Subscription):
    """A subscription over the socket: its events are read by whichever thread waits."""

    def __init__(self, transport: SocketTransport, name: str, window: CreditWindow) -> None:
        super().__init__(name, window)
        self._t = transport

    def recv(self, timeout: float | None = None) -> bytes:
        t, proto = self._t, self._t._proto
        deadline = None if timeout is None else time.monotonic() + timeout
        with t._cond:
            if not self.ready:
                proto.flush(self)  # credit for what was taken, before waiting for more
                t._send_queued()
                try:
                    t._pump(lambda: self.ready, deadline)
                except PhloemError as err:
                    if err.kind == ErrorKind.TIMEOUT:
                        raise PhloemError(
                            ErrorKind.TIMEOUT, f"no event within {timeout} s"
                        ) from err
                    if not self.ready:
                        raise
            try:
                return proto.take(self)
            finally:
                t._send_queued()

    def close(self) -> None:
        """Unsubscribe (waits at most `REPLY_GRACE_S` for the daemon's answer); events
        still buffered are dropped and `recv` raises `closed` from now on."""
        t = self._t
        with t._cond:
            request = t._proto.unsubscribe(self)
        if request is None or t.closed:
            return
        with contextlib.suppress(PhloemError):
            t._roundtrip(lambda: request)
