"""One client connection past its hello (`phloem.daemon.handshake` reads the hello),
served by the connection loop (`phloem.daemon.loop`): the loop reads what arrives, decodes
the frames and routes them through the tree in order. A request that may block (a status
or tree reading, logs, a subscription, an actor not yet resolved) is handled on a thread
of its own while the connection's reading pauses, so neither the loop nor the order of a
connection's requests suffers. Replies and stream events are written straight to the
socket from whatever thread has them when it has room, else queued (bounded by
`max_outbox_bytes`) for the loop to write. A bad frame gets one error frame and closes
that connection only. When a connection ends, everything its owner held is cancelled (on
a closing thread: the owner's cancellations and the last flush may take time)."""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
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
from phloem.supervision import timers
from phloem.supervision.credit import CreditStream, Subscription
from phloem.supervision.reasons import ExitReason
from phloem.supervision.refs import Owner

if TYPE_CHECKING:
    from phloem.daemon.loop import ConnectionLoop
    from phloem.daemon.server import Server


log = get_logger("phloem.daemon")

RECV_BYTES = 64 * 1024  # below malloc's mmap threshold: a bigger read buffer costs an mmap per read
CLOSE_FLUSH_TIMEOUT_S = 2.0  # how long a closing connection may take to flush its last frames
CLOSE_DRAIN_BYTES = 1024 * 1024  # input read and dropped at most while closing
INFLIGHT_POLL_S = 0.1  # how often a half-closed connection checks that its peer is still there
WRITE_BATCH_BYTES = 64 * 1024  # queued frames joined into one send at most

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_HANGUP = select.POLLHUP | select.POLLERR


class Connection:
    """One client connection: an owner, its frames read by the loop, a bounded outbox.

    Threads: the loop thread reads, dispatches and writes what is queued; any thread may
    `send_frame` (the outbox lock guards the socket's writing side); a request that may
    block runs on a thread of its own (`_offloaded`: one at a time, reading paused);
    closing runs on a thread of its own too (`_cleanup`).
    """

    def __init__(
        self,
        server: Server,
        loop: ConnectionLoop,
        sock: socket.socket,
        peer: tuple[int, int, int],
        frames: FrameReader,
    ) -> None:
        """`sock` (non-blocking) has said hello; `frames` holds what was read past it."""
        self.server = server
        self.loop = loop
        self.sock = sock
        self.peer_pid, self.peer_uid, _ = peer
        self.owner = Owner.connection(f"pid={self.peer_pid} uid={self.peer_uid}", uid=self.peer_uid)
        cfg = server.config.daemon
        self.max_frame_bytes = cfg.max_frame_bytes
        self._frames = frames
        # the loop thread's own
        self._ready: deque[bytes] = deque()  # frames read, not yet handled
        self._offloaded = False  # a request is being handled on a thread of its own
        self._draining = False  # the peer stopped sending; waiting for in-flight replies
        self._closing = False
        self._frame_timer: timers.Timer | None = None
        self._drain_timer: timers.Timer | None = None
        self._watching = 0  # the selector events asked for
        # outbox
        self._wlock = threading.Lock()
        self._outbox: deque[bytes] = deque()
        self._outbox_bytes = 0
        self._want_write = False  # the loop is asked to write the outbox
        self._corked = 0  # write batches holding this connection's frames (`writebatch`)
        self._dead = False
        self.closed = threading.Event()  # set once the socket is closed and forgotten
        # requests and streams
        self._lock = threading.Lock()
        self._inflight = 0
        self._replying = 0  # replies out of the in-flight count, still being written
        self._subs: dict[int, tuple[CreditStream[bytes], Subscription]] = {}
        self._sub_ids = itertools.count(1)
        self._bad_requests = 0  # requests refused for their own id (nested too deeply)

    # -- writing (any thread) ------------------------------------------------------------

    def send_frame(self, frame: bytes) -> bool:
        """Write now if the socket has room and the loop is not busy, else queue for the
        loop; False if dead.

        While the loop runs, a send from another thread would hand it the GIL for the
        syscall and then wait for it back (up to the switch interval, 5 ms); queued, the
        frame is written by the loop along with others, and the replying thread (a
        service's) goes on with its next message. An idle loop would need a wake-up to
        write it: the thread then writes it itself."""
        loop = self.loop
        batch = writebatch.held()
        with self._wlock:
            if self._dead:
                return False
            if batch is not None:  # this thread's write batch: held until `uncork`
                if self._outbox_bytes + len(frame) > self.server.config.daemon.max_outbox_bytes:
                    log.warning("connection_outbox_full", owner=self.owner.id)
                    self._kill_locked()
                    return False
                if self not in batch:
                    batch[self] = None
                    self._corked += 1
                self._outbox.append(frame)
                self._outbox_bytes += len(frame)
                return True
            if not self._outbox and not self._corked and (not loop.busy() or loop.in_loop()):
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
            if self._want_write or self._corked:  # the loop, or the batch's end, writes it
                return True
            self._want_write = True
        loop.call_soon(self._write_queued)
        return True

    def uncork(self) -> None:
        """A write batch that held frames for this connection ended (`writebatch`): write
        them in one go now if the loop is idle, else hand them to the loop."""
        loop = self.loop
        with self._wlock:
            self._corked -= 1
            if self._corked or self._dead or not self._outbox or self._want_write:
                return
            if (not loop.busy() or loop.in_loop()) and self._send_queued_locked():
                return
            self._want_write = True
        loop.call_soon(self._write_queued)

    def _write_queued(self) -> None:
        """Write what the socket takes of the outbox; watch for room if some is left."""
        with self._wlock:
            if self._corked:  # held by a write batch: its end writes the outbox
                self._want_write = False
                return
            done = self._send_queued_locked()
            if done:
                self._want_write = False
        if not done:
            self._update_watch()

    def _send_queued_locked(self) -> bool:
        """Send what the socket takes of the outbox; True once it is empty."""
        outbox = self._outbox
        while outbox:
            chunk = outbox[0]
            if len(outbox) > 1 and len(chunk) < WRITE_BATCH_BYTES:
                parts = [outbox.popleft()]
                size = len(chunk)
                while outbox and size + len(outbox[0]) <= WRITE_BATCH_BYTES:
                    size += len(outbox[0])
                    parts.append(outbox.popleft())
                chunk = b"".join(parts)
                outbox.appendleft(chunk)
            try:
                n = self.sock.send(chunk, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return False
            except OSError:
                self._kill_locked()
                return True
            self._outbox_bytes -= n
            if n < len(chunk):
                outbox[0] = chunk[n:]
                return False
            outbox.popleft()
        return True

    def _kill_locked(self) -> None:
        self._dead = True
        self._outbox.clear()
        self._outbox_bytes = 0
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # the loop reads the end and closes

    def _flush(self, timeout: float) -> None:
        """Write the outbox out, waiting up to `timeout` for room (closing thread)."""
        deadline = time.monotonic() + timeout
        waiter = select.poll()
        waiter.register(self.sock, select.POLLOUT)
        while True:
            with self._wlock:
                if self._dead or self._send_queued_locked():
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            waiter.poll(int(remaining * 1000) + 1)

    def shutdown(self) -> None:
        """Make the connection end (server stop; any thread)."""
        with self._wlock:
            self._kill_locked()

    def _fail(self, kind: str, message: str, rid: int | None = None) -> None:
        self.send_frame(encode_frame(Fail(rid, ErrorValue(kind=kind, message=message))))

    # -- the loop thread -----------------------------------------------------------------

    def open(self) -> None:
        """Greet the peer and start reading (on the loop)."""
        self._guarded(self._open)

    def _open(self) -> None:
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
        self._take(None)  # the frames read along with the hello
        self._dispatch()
        self._update_watch()

    def _take(self, data: bytes | None) -> None:
        """Add `data` (if any) to the frames read; a header over `max_frame_bytes` is
        raised again by `check`, once the frames before it are handled."""
        with contextlib.suppress(PhloemError):
            self._ready.extend(self._frames.frames() if data is None else self._frames.feed(data))

    def _update_watch(self) -> None:
        if self._closing:
            return
        events = _WRITE if self._want_write else 0
        if not self._offloaded and not self._draining:
            events |= _READ
        if events != self._watching:
            self._watching = events
            self.loop.watch(self.sock, events, self._on_ready)

    def _on_ready(self, events: int) -> None:
        try:
            self._serve_ready(events)
        except Exception:  # a bug here must still close this connection, and only it
            log.exception("connection_failed", owner=self.owner.id)
            self._fail_and_close(ErrorKind.INTERNAL, "the daemon failed to serve this connection")

    def _guarded(self, serve: Callable[[], None]) -> None:
        try:
            serve()
        except Exception:  # a bug here must still close this connection, and only it
            log.exception("connection_failed", owner=self.owner.id)
            self._fail_and_close(ErrorKind.INTERNAL, "the daemon failed to serve this connection")

    def _serve_ready(self, events: int) -> None:
        if events & _WRITE:
            with self._wlock:
                done = self._send_queued_locked()
                if done:
                    self._want_write = False
            if done:
                self._update_watch()
        if events & _READ and not self._closing and not self._offloaded and not self._draining:
            self._read()

    def _read(self) -> None:
        try:
            data = self.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._peer_closed()
            return
        self._take(data)
        self._dispatch()
        self._update_watch()

    def _dispatch(self) -> None:
        """Handle the frames read, in order, until one must run off the loop."""
        handled = bool(self._ready)
        while self._ready and not self._offloaded and not self._closing:
            frame = self._ready.popleft()
            try:
                message = decode_client(frame)
            except BadRequest as bad:  # that request only; counted, logged once at the end
                self._bad_requests += 1
                self._fail(bad.kind, bad.message, bad.request_id)
                continue
            except PhloemError as err:
                self._fail_and_close(err.kind, err.message)
                return
            if self._blocks(message):
                self._offloaded = True
                threading.Thread(
                    target=self._handle_offloaded,
                    args=(message,),
                    name=f"phloem-conn-{self.peer_pid}",
                    daemon=True,
                ).start()
                return
            self._handle_guarded(message)
        if self._offloaded or self._closing:
            return
        try:
            self._frames.check()  # a header over max_frame_bytes, after the frames before it
        except PhloemError as err:
            self._fail_and_close(err.kind, err.message)
            return
        self._watch_partial(restart=handled)

    def _watch_partial(self, restart: bool) -> None:
        """A frame begun and not finished has `frame_timeout_s` to arrive; the clock
        restarts after each complete frame."""
        timer = self._frame_timer
        if timer is not None and (restart or not self._frames.partial):
            timer.cancel()
            self._frame_timer = timer = None
        if timer is None and self._frames.partial:
            self._frame_timer = self._later(
                self.server.config.daemon.frame_timeout_s, self._frame_late
            )

    def _later(self, seconds: float, fn: Callable[[timers.Timer], None]) -> timers.Timer | None:
        """`fn(timer)` on the loop in `seconds` (scheduled on `supervision.timers`); None,
        and the connection closed, when the scheduler has no room."""
        try:
            timer = timers.call_later(seconds, lambda: self.loop.call_soon(lambda: fn(timer)))
        except PhloemError as err:
            self._fail_and_close(err.kind, f"no room for this connection's deadline: {err}")
            return None
        return timer

    def _frame_late(self, timer: timers.Timer) -> None:
        if self._frame_timer is not timer:
            return  # cancelled, or replaced, after it fired
        self._frame_timer = None
        if self._frames.partial and not self._closing and not self._offloaded:
            self._fail_and_close(ErrorKind.TIMEOUT, "incomplete frame: peer stopped sending")

    def _blocks(self, message: Any) -> bool:
        """Whether handling `message` may block (it then runs on a thread of its own)."""
        if isinstance(message, Ask | Tell):
            return not self.server.tree.routes_now(message.actor)
        return isinstance(message, GetStatus | GetTree | GetLogs | Subscribe | ControlChild)

    def _handle_guarded(self, message: Any) -> bool:
        """`_handle`; a failure closes the connection (False). On the loop."""
        try:
            self._handle(message)
        except PhloemError as err:
            self._fail_and_close(err.kind, err.message)
            return False
        except Exception:
            log.exception("connection_failed", owner=self.owner.id)
            self._fail_and_close(ErrorKind.INTERNAL, "the daemon failed to serve this connection")
            return False
        return True

    def _handle_offloaded(self, message: Any) -> None:
        failure: tuple[str, str] | None = None
        try:
            self._handle(message)
        except PhloemError as err:
            failure = (err.kind, err.message)
        except Exception:
            log.exception("connection_failed", owner=self.owner.id)
            failure = (ErrorKind.INTERNAL, "the daemon failed to serve this connection")
        self.loop.call_soon(lambda: self._resume(failure))

    def _resume(self, failure: tuple[str, str] | None) -> None:
        self._offloaded = False
        if self._closing:
            return
        if failure is not None:
            self._fail_and_close(*failure)
            return
        self._dispatch()
        self._update_watch()

    def _fail_and_close(self, kind: str, message: str) -> None:
        self._fail(kind, message)
        self._close()

    def _peer_closed(self) -> None:
        """The peer stopped sending (or is gone). A truncated frame is an error. If it
        only half-closed, it still reads: let its requests finish (each has a deadline);
        if it is gone (hang-up), stop at once."""
        if self._frames.partial:
            self._fail_and_close(
                ErrorKind.BAD_FRAME, "truncated frame: connection closed mid-frame"
            )
            return
        self._draining = True
        self._update_watch()
        self._check_drained()

    def _check_drained(self) -> None:
        if self._closing:
            return
        with self._lock:
            busy = self._inflight > 0 or self._replying > 0
        if busy and not self._dead:
            hangup = select.poll()
            hangup.register(self.sock, select.POLLHUP)
            busy = not any(ev & _HANGUP for _, ev in hangup.poll(0))
        if not busy:
            self._close()
        elif self._drain_timer is None:
            self._drain_timer = self._later(INFLIGHT_POLL_S, self._drain_tick)

    def _drain_tick(self, timer: timers.Timer) -> None:
        if self._drain_timer is not timer:
            return
        self._drain_timer = None
        self._check_drained()

    def _close(self) -> None:
        """Stop serving: the rest (cancelling, the last flush, closing) on a thread."""
        if self._closing:
            return
        self._closing = True
        for timer in (self._frame_timer, self._drain_timer):
            if timer is not None:
                timer.cancel()
        self._frame_timer = self._drain_timer = None
        self.loop.forget(self.sock)
        self._watching = 0
        threading.Thread(target=self._cleanup, name="phloem-conn-close", daemon=True).start()

    def _cleanup(self) -> None:
        with self._lock:
            subs = list(self._subs.values())
            self._subs.clear()
        for stream, sub in subs:
            stream.unsubscribe(sub, ExitReason.owner_down())
        self.server.tree.owner_down(self.owner)
        self._flush(CLOSE_FLUSH_TIMEOUT_S)
        with self._wlock:
            already_dead = self._dead
            self._dead = True
            self._outbox.clear()
            self._outbox_bytes = 0
        if already_dead:
            self.sock.close()
        else:
            close_gently(self.sock)
        if self._bad_requests:
            log.warning("requests_too_deep", owner=self.owner.id, count=self._bad_requests)
        self.server._forget(self)
        self.closed.set()
        log.debug("connection_closed", owner=self.owner.id)

    # -- requests (the loop, or a request's own thread) ----------------------------------

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
            with self._lock:
                self._replying -= 1
            if self._draining:
                self.loop.call_soon(self._check_drained)

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
