"""One client connection past its hello (`phloem.daemon.handshake` reads the hello): a
reader thread that decodes frames and routes them through the tree, and replies written
straight to the socket or queued (bounded by `max_outbox_bytes`) for a writer thread. A
bad frame gets one error frame and closes that connection only. When a connection ends,
everything its owner held is cancelled."""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import socket
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import msgspec

from phloem._version import __version__
from phloem.base import writebatch
from phloem.base.logs import get_logger
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.wire import (
    HEADER_BYTES,
    NIL,
    PROTOCOL_VERSION,
    Ask,
    BadRequest,
    ControlChild,
    Credit,
    Event,
    Fail,
    FrameReader,
    GetLogs,
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
    decode_client,
    encode_frame,
)
from phloem.supervision.credit import CreditStream, Subscription
from phloem.supervision.reasons import ExitReason
from phloem.supervision.refs import Owner

if TYPE_CHECKING:
    from phloem.daemon.server import Server


log = get_logger("phloem.daemon")

RECV_BYTES = 64 * 1024  # below malloc's mmap threshold: a bigger read buffer costs an mmap per read
CLOSE_FLUSH_TIMEOUT_S = 2.0  # how long a closing connection may take to flush its last frames
CLOSE_DRAIN_BYTES = 1024 * 1024  # input read and dropped at most while closing
INFLIGHT_POLL_S = 0.1  # how often a half-closed connection checks that its peer is still there


class _Closed(Exception):
    def __init__(self, partial: bool) -> None:
        super().__init__("peer closed the connection")
        self.partial = partial


class Connection:
    """One client connection: an owner, a reader thread and a bounded outbox."""

    def __init__(
        self,
        server: Server,
        sock: socket.socket,
        peer: tuple[int, int, int],
        frames: FrameReader,
    ) -> None:
        """`sock` (blocking) has said hello; `frames` holds what was read past it."""
        self.server = server
        self.sock = sock
        self.peer_pid, self.peer_uid, _ = peer
        self.owner = Owner.connection(f"pid={self.peer_pid} uid={self.peer_uid}", uid=self.peer_uid)
        cfg = server.config.daemon
        self.max_frame_bytes = cfg.max_frame_bytes
        self._frames = frames
        self._ready: deque[bytes] = deque()
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        # outbox
        self._wcond = threading.Condition()
        self._outbox: deque[bytes] = deque()
        self._outbox_bytes = 0
        self._writing = False
        self._corks = 0  # open write batches holding this connection's frames
        self._writer: threading.Thread | None = None
        self._dead = False
        # requests and streams
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._inflight = 0
        self._replying = 0  # replies out of the in-flight count, still being written
        self._draining = False  # the peer stopped sending; waiting for in-flight replies
        self._subs: dict[int, tuple[CreditStream[bytes], Subscription]] = {}
        self._sub_ids = itertools.count(1)
        self._bad_requests = 0  # requests refused for their own id (nested too deeply)
        self.thread = threading.Thread(
            target=self._run, name=f"phloem-conn-{self.peer_pid}", daemon=True
        )

    # -- writing -------------------------------------------------------------------------

    def send_frame(self, frame: bytes) -> bool:
        """Write now if the socket has room, else queue for the writer; False if dead.
        Inside a write batch of this thread (`writebatch`) the frame waits in the outbox
        until the batch ends (`uncork`)."""
        batch = writebatch.held()
        with self._wcond:
            if self._dead:
                return False
            if batch is not None and self not in batch:
                batch[self] = None
                self._corks += 1
            if not self._outbox and not self._writing and not self._corks:
                try:
                    n = self.sock.send(frame, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    n = 0
                except OSError:
                    self._kill_locked()
                    return False
                if n == len(frame):
                    return True
                frame = frame[n:]
            if self._outbox_bytes + len(frame) > self.server.config.daemon.max_outbox_bytes:
                log.warning("connection_outbox_full", owner=self.owner.id)
                self._kill_locked()
                return False
            self._outbox.append(frame)
            self._outbox_bytes += len(frame)
            if self._corks:
                return True  # written when the batch ends
            self._start_writer_locked()
            return True

    def uncork(self) -> None:
        """A write batch that held this connection ended: once none holds it, write what
        waits in one go (the rest, if the socket is full, goes to the writer)."""
        with self._wcond:
            self._corks -= 1
            if self._corks or self._dead or not self._outbox:
                return
            if not self._writing:
                data = b"".join(self._outbox)
                self._outbox.clear()
                try:
                    n = self.sock.send(data, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    n = 0
                except OSError:
                    self._kill_locked()
                    return
                self._outbox_bytes = len(data) - n
                if n == len(data):
                    return
                self._outbox.append(data[n:])
            self._start_writer_locked()

    def _start_writer_locked(self) -> None:
        if self._writer is None:
            self._writer = threading.Thread(
                target=self._write_loop, name="phloem-conn-writer", daemon=True
            )
            self._writer.start()
        self._wcond.notify_all()

    def _write_loop(self) -> None:
        while True:
            with self._wcond:
                while (not self._outbox or self._corks) and not self._dead:
                    self._wcond.wait()
                if self._dead:
                    return
                chunk = self._outbox.popleft()
                self._outbox_bytes -= len(chunk)
                self._writing = True
            try:
                self.sock.sendall(chunk)
            except OSError:
                with self._wcond:
                    self._kill_locked()
                return
            with self._wcond:
                self._writing = False
                self._wcond.notify_all()

    def _kill_locked(self) -> None:
        self._dead = True
        self._outbox.clear()
        self._outbox_bytes = 0
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._wcond.notify_all()

    def _flush(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._wcond:
            while (self._outbox or self._writing) and not self._dead:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._wcond.wait(remaining)

    def shutdown(self) -> None:
        """Make the reader thread end (server stop)."""
        with self._wcond:
            self._kill_locked()

    def _fail(self, kind: str, message: str, rid: int | None = None) -> None:
        self.send_frame(encode_frame(Fail(rid, ErrorValue(kind=kind, message=message))))

    # -- reading -------------------------------------------------------------------------

    def _next_frame(self) -> bytes:
        deadline: float | None = None
        while not self._ready:
            self._frames.check()
            if deadline is None and self._frames.partial:
                deadline = time.monotonic() + self.server.config.daemon.frame_timeout_s
            if deadline is not None:  # idle waits need no timer: block in recv
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PhloemError(ErrorKind.TIMEOUT, "incomplete frame: peer stopped sending")
                if not self._poll.poll(int(remaining * 1000) + 1):
                    continue
            try:
                data = self.sock.recv(RECV_BYTES)
            except OSError as exc:
                raise _Closed(self._frames.partial) from exc
            if not data:
                raise _Closed(self._frames.partial)
            self._ready.extend(self._frames.feed(data))
        return self._ready.popleft()

    def _run(self) -> None:
        try:
            self._serve()
        except _Closed as closed:
            if closed.partial:
                self._fail(ErrorKind.BAD_FRAME, "truncated frame: connection closed mid-frame")
            else:
                self._finish_inflight()
        except PhloemError as err:
            self._fail(err.kind, err.message)
        except Exception:
            log.exception("connection_failed", owner=self.owner.id)
            self._fail(ErrorKind.INTERNAL, "the daemon failed to serve this connection")
        finally:
            self._cleanup()

    def _finish_inflight(self) -> None:
        """The peer stopped sending. If it only half-closed, it still reads: let its
        requests finish (each has a deadline). If it is gone (hang-up), stop at once."""
        hangup = select.poll()
        hangup.register(self.sock, select.POLLHUP)
        with self._idle:
            self._draining = True
            while self._inflight > 0 or self._replying > 0:
                if any(ev & (select.POLLHUP | select.POLLERR) for _, ev in hangup.poll(0)):
                    return
                self._idle.wait(INFLIGHT_POLL_S)

    def _cleanup(self) -> None:
        with self._lock:
            subs = list(self._subs.values())
            self._subs.clear()
        for stream, sub in subs:
            stream.unsubscribe(sub, ExitReason.owner_down())
        self.server.tree.owner_down(self.owner)
        self._flush(CLOSE_FLUSH_TIMEOUT_S)
        with self._wcond:
            already_dead = self._dead
            self._dead = True
            self._outbox.clear()
            self._wcond.notify_all()
        if already_dead:
            self.sock.close()
        else:
            close_gently(self.sock)
        if self._bad_requests:
            log.warning("requests_too_deep", owner=self.owner.id, count=self._bad_requests)
        self.server._forget(self)
        log.debug("connection_closed", owner=self.owner.id)

    def _serve(self) -> None:
        cfg = self.server.config.daemon
        self.send_frame(
            encode_frame(
                Welcome(
                    version=PROTOCOL_VERSION,
                    server=f"phloem/{__version__}",
                    pid=os.getpid(),
                    max_frame_bytes=cfg.max_frame_bytes,
                    request_timeout_s=cfg.request_timeout_s,
                    max_inflight=cfg.max_inflight_per_connection,
                )
            )
        )
        self._ready.extend(self._frames.frames())  # read along with the hello
        while True:
            frame = self._next_frame()
            try:
                message = decode_client(frame)
            except BadRequest as bad:  # that request only; counted, logged once at the end
                self._bad_requests += 1
                self._fail(bad.kind, bad.message, bad.request_id)
                continue
            self._handle(message)

    def _handle(self, message: Any) -> None:
        tree = self.server.tree
        if isinstance(message, Ask | Tell):
            if not self._admit(message.id):
                return
            timeout = message.timeout if isinstance(message, Ask) else None
            tree.call(
                self.owner,
                message.actor,
                bytes(message.body),
                timeout,
                self._responder(message.id),
                tell=isinstance(message, Tell),
                trace=None if message.trace is None else message.trace.carrier(),
            )
        elif isinstance(message, Credit):
            with self._lock:
                entry = self._subs.get(message.sub)
            if entry is not None:  # unknown: the stream already ended; acks are late
                check_range("credit messages", message.messages, 0, None, kind=ErrorKind.BAD_FRAME)
                check_range("credit bytes", message.bytes, 0, None, kind=ErrorKind.BAD_FRAME)
                entry[0].ack(entry[1], message.messages, message.bytes)
        elif isinstance(message, GetStatus):
            self._reply(message.id, tree.status())
        elif isinstance(message, GetTree):
            self._reply(message.id, tree.snapshot())
        elif isinstance(message, ControlChild):
            if self._admit(message.id):
                log.info(
                    "child_control_requested",
                    action=message.action,
                    path=message.path[:200],
                    owner=self.owner.id,
                    peer_pid=self.peer_pid,
                )
                tree.control(
                    message.action, message.path, message.timeout, self._responder(message.id)
                )
        elif isinstance(message, GetLogs):
            try:
                logs = tree.logs(self.owner, message.path, message.since, message.follow)
            except PhloemError as err:
                self._fail(err.kind, err.message, message.id)
            else:
                self._reply(message.id, logs)
        elif isinstance(message, Subscribe):
            self._subscribe(message)
        elif isinstance(message, Unsubscribe):
            with self._lock:
                entry = self._subs.get(message.sub)
            if entry is not None:
                entry[0].unsubscribe(entry[1])
            self.send_frame(encode_frame(Reply(message.id, NIL)))
        elif isinstance(message, Ping):
            self.send_frame(encode_frame(Reply(message.id, NIL)))
        elif isinstance(message, StopDaemon):
            self.send_frame(encode_frame(Reply(message.id, NIL)))
            log.info("stop_requested", owner=self.owner.id, peer_pid=self.peer_pid)
            self.server.request_stop()
        elif isinstance(message, Hello):
            raise PhloemError(ErrorKind.BAD_FRAME, "hello sent twice")

    def _admit(self, rid: int) -> bool:
        with self._lock:
            if self._inflight >= self.server.config.daemon.max_inflight_per_connection:
                limit = self.server.config.daemon.max_inflight_per_connection
                self._fail(ErrorKind.BACKPRESSURE, f"{limit} requests in flight", rid)
                return False
            self._inflight += 1
            return True

    def _responder(self, rid: int) -> Any:
        def respond(outcome: tuple[bool, bytes | ErrorValue]) -> None:
            ok, value = outcome
            if ok:
                assert isinstance(value, bytes)
                frame = encode_frame(Reply(rid, msgspec.Raw(value)))
                if len(frame) - HEADER_BYTES > self.max_frame_bytes:
                    frame = encode_frame(
                        Fail(
                            rid,
                            ErrorValue(
                                kind=ErrorKind.FRAME_TOO_LARGE,
                                message=f"reply of {len(frame)} bytes exceeds max_frame_bytes",
                            ),
                        )
                    )
            else:
                assert isinstance(value, ErrorValue)
                frame = encode_frame(Fail(rid, value))
            # The request stops counting against the in-flight limit before its reply is
            # written: a client that sends its next request the moment this reply
            # arrives must find the slot free. Drain still waits for the write.
            with self._lock:
                self._inflight -= 1
                self._replying += 1
            self.send_frame(frame)
            with self._idle:
                self._replying -= 1
                if self._draining:
                    self._idle.notify_all()

        return respond

    def _reply(self, rid: int, value: Any) -> None:
        self._responder_direct(rid, msgspec.msgpack.encode(value))

    def _responder_direct(self, rid: int, body: bytes) -> None:
        with self._lock:
            self._inflight += 1
        self._responder(rid)((True, body))

    def _subscribe(self, message: Subscribe) -> None:
        try:
            window = CreditWindow(message.window_messages, message.window_bytes)
        except (TypeError, ValueError) as exc:
            why = exc.message if isinstance(exc, PhloemError) else str(exc)
            self._fail(ErrorKind.BAD_MESSAGE, f"window {why}", message.id)
            return
        try:
            topic = self.server.tree.streams.get(message.stream, self.owner)
        except PhloemError as err:
            self._fail(err.kind, err.message, message.id)
            return
        sub_id = next(self._sub_ids)
        self.send_frame(
            encode_frame(Reply(message.id, msgspec.Raw(msgspec.msgpack.encode(sub_id))))
        )

        def deliver(data: bytes) -> None:
            frame = encode_frame(Event(sub_id, msgspec.Raw(data)))
            if len(frame) - HEADER_BYTES > self.max_frame_bytes:
                raise PhloemError(ErrorKind.FRAME_TOO_LARGE, "event exceeds max_frame_bytes")
            self.send_frame(frame)

        def on_detach(reason: ExitReason) -> None:
            with self._lock:
                self._subs.pop(sub_id, None)
            detail = reason.detail or reason.message
            self.send_frame(encode_frame(StreamEnd(sub_id, reason.kind.value, detail)))

        stream = topic.stream
        try:
            sub = stream.subscribe(window, deliver, on_detach)
        except PhloemError as err:
            self.send_frame(encode_frame(StreamEnd(sub_id, err.kind, err.message)))
            return
        with self._lock:
            if sub.attached:
                self._subs[sub_id] = (stream, sub)


def close_gently(sock: socket.socket) -> None:
    """Half-close, then drain what the peer already sent before closing: closing a Unix
    socket with unread input resets the connection and the peer may lose our last frame."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(CLOSE_FLUSH_TIMEOUT_S)
        deadline = time.monotonic() + CLOSE_FLUSH_TIMEOUT_S
        drained = 0
        while drained < CLOSE_DRAIN_BYTES and time.monotonic() < deadline:
            chunk = sock.recv(RECV_BYTES)
            if not chunk:
                break
            drained += len(chunk)
    sock.close()
