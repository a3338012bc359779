"""The client side of the wire protocol, as a state machine that does no I/O.

`ClientProtocol` is one connection's state: the handshake, request ids and the replies
they are waiting for, the subscriptions with their credit, and the decoding of the
daemon's frames. A transport hands it the bytes it read (`receive`, which answers with
`ProtocolEvent`s), sends the frames its methods return and, after each `receive` and
`take`, what it queued itself (`data_to_send`: credit returned as events are consumed,
the unsubscription of a stream nobody waits for). The threaded client (`socket.py`) and
the asyncio client (`aio.py`) both drive one; neither speaks the protocol itself.

Not thread-safe: the threaded client calls it under its lock.

Rules it keeps (see `phloem.protocols.wire` for the conversation):
- one reply per request id; a reply nobody waits for any more (the caller gave up) is
  dropped, and an ask or tell still counts as in flight until the daemon has answered it,
  because the daemon counts it until then (`inflight`);
- a request larger than the daemon's `max_frame_bytes` is refused before it is sent
  (`frame_too_large`), leaving the connection as it was;
- a frame that cannot be decoded, a header over the limit, a `Fail` without an id and an
  event beyond the granted credit end the connection (`Failed`): every stream ends with
  that error and every request fails with it;
- at most `max_outstanding` requests wait for their replies at once (`backpressure`).
"""

from __future__ import annotations

import itertools
from collections import deque
from pathlib import Path
from typing import Any

import msgspec

from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.wire import (
    DEFAULT_MAX_FRAME_BYTES,
    HEADER_BYTES,
    MAX_FRAME_BYTES_LIMIT,
    PROTOCOL_VERSION,
    Ask,
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
    TraceContext,
    Unsubscribe,
    Welcome,
    decode_server,
    encode_frame,
)

DEFAULT_CONNECT_TIMEOUT_S = 5.0  # to connect (room in a full backlog included) and shake hands
DEFAULT_REQUEST_TIMEOUT_S = 30.0  # until the welcome names the daemon's own
REPLY_GRACE_S = 5.0  # how long past the daemon's own deadline a client waits for a reply
RECV_BYTES = 64 * 1024  # below malloc's mmap threshold: a bigger read buffer costs an mmap per read
MIN_READ_FRAME_BYTES = 1024  # the smallest frame limit a welcome can set for reading
DEFAULT_MAX_OUTSTANDING = 100_000  # requests waiting for their replies on one connection
MAX_OUTSTANDING_RANGE = (1, 1_000_000)

_CONTROL: dict[str, type[GetStatus | GetTree | StopDaemon | Ping]] = {
    "status": GetStatus,
    "tree": GetTree,
    "stop": StopDaemon,
    "ping": Ping,
}


def no_daemon_error(path: Path | str) -> PhloemError:
    return PhloemError(
        ErrorKind.NO_DAEMON,
        f"no phloem daemon at {path} (start one with `phloem daemon --config ...`)",
    )


def connect_error(path: Path | str, exc: OSError) -> PhloemError:
    """What a failed connect to the daemon's socket means, as an error kind."""
    if isinstance(exc, FileNotFoundError | ConnectionRefusedError | NotADirectoryError):
        return no_daemon_error(path)
    if isinstance(exc, PermissionError):
        return PhloemError(ErrorKind.PERMISSION_DENIED, f"cannot connect to {path}: {exc}")
    if isinstance(exc, TimeoutError | BlockingIOError):  # BlockingIOError: a full backlog
        return PhloemError(ErrorKind.TIMEOUT, f"connecting to {path} timed out")
    return PhloemError(ErrorKind.CONNECTION_LOST, f"cannot connect to {path}: {exc}")


# --- what `receive` reports -----------------------------------------------------------


class Welcomed(msgspec.Struct, frozen=True):
    """The handshake is done."""

    welcome: Welcome


class Answered(msgspec.Struct, frozen=True):
    """The reply to request `rid`; `counted`: an ask or tell (it no longer counts as in
    flight)."""

    rid: int
    message: Reply | Fail
    counted: bool

    def body(self) -> bytes:
        """The reply's body; the daemon's error as a `PhloemError`."""
        if isinstance(self.message, Fail):
            raise PhloemError.from_value(self.message.error)
        return bytes(self.message.body)


class StreamChanged(msgspec.Struct, frozen=True):
    """An event for `stream` arrived, or it ended."""

    stream: Subscription


class Failed(msgspec.Struct, frozen=True):
    """The connection is over: every request and stream failed with `error`. `inflight`
    asks and tells were outstanding when it did; `streams` ended with it."""

    error: PhloemError
    inflight: int
    streams: tuple[Subscription, ...] = ()


ProtocolEvent = Welcomed | Answered | StreamChanged | Failed
# (msgspec structs rather than dataclasses: defining one costs microseconds, not a
# millisecond, and every CLI command imports this module)


class Outgoing(msgspec.Struct, frozen=True):
    """A request to send: its id, its frame, and how long to wait for its reply."""

    rid: int
    frame: bytes
    wait_s: float


# --- one subscription ------------------------------------------------------------------


class Subscription:
    """One stream's state: the events received and not yet taken (at most the window),
    the credit owed back to the daemon, and how it ended. The transports subclass it to
    add their way of waiting."""

    def __init__(self, name: str, window: CreditWindow) -> None:
        self.name = name
        self.window = window
        self.sub: int | None = None  # the daemon's id, once it has accepted
        self.end: PhloemError | None = None
        self.abandoned = False  # nobody will read it: unsubscribe once it is accepted
        self._buffer: deque[bytes] = deque()
        self._unacked_msgs = 0  # taken, their credit not queued yet
        self._unacked_bytes = 0
        self._received = 0  # events received, and credit sent back, over the stream's life:
        self._credited = 0  # the daemon may have sent at most the window beyond the credit
        self._batch_msgs = max(1, window.messages // 2)
        self._batch_bytes = max(1, window.bytes // 2)

    @property
    def buffered(self) -> int:
        """Events received and not yet taken."""
        return len(self._buffer)

    @property
    def ready(self) -> bool:
        """`take` will not wait: an event is buffered, or the stream has ended."""
        return bool(self._buffer) or self.end is not None

    def _finish(self, err: PhloemError) -> None:
        if self.end is None:
            self.end = err


# --- the connection --------------------------------------------------------------------


class _Pending(msgspec.Struct):
    counted: bool
    stream: Subscription | None
    waited: bool = True  # False once the caller gave up


class ClientProtocol:
    """One connection's protocol state (see the module docstring)."""

    def __init__(self, client: str, *, max_outstanding: int = DEFAULT_MAX_OUTSTANDING) -> None:
        self.client = client
        self.max_outstanding = check_range(
            "max_outstanding", max_outstanding, *MAX_OUTSTANDING_RANGE
        )
        self.welcome: Welcome | None = None
        self.error: PhloemError | None = None
        self.request_timeout_s = DEFAULT_REQUEST_TIMEOUT_S
        self.max_frame_bytes = DEFAULT_MAX_FRAME_BYTES  # what the daemon accepts from us
        self._frames = FrameReader(DEFAULT_MAX_FRAME_BYTES)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._inflight = 0
        self._subs: dict[int, Subscription] = {}
        self._credit: dict[int, tuple[int, int]] = {}  # sub -> credit to return
        self._unsubscribe: list[int] = []  # subs to end on the daemon (nobody reads them)

    # -- state ---------------------------------------------------------------------------

    @property
    def inflight(self) -> int:
        """Asks and tells sent that the daemon has not answered yet."""
        return self._inflight

    @property
    def outstanding(self) -> int:
        """Requests sent whose reply has not arrived yet."""
        return len(self._pending)

    def check(self) -> None:
        """Raise the error that ended the connection, if one did."""
        if self.error is not None:
            raise self.error

    # -- requests ------------------------------------------------------------------------

    def hello(self) -> bytes:
        """The first frame of the connection."""
        return encode_frame(Hello(version=PROTOCOL_VERSION, client=self.client))

    def reply_wait(self, timeout: float | None) -> float:
        """How long to wait for the reply to a request with the daemon-side `timeout`."""
        return (timeout if timeout is not None else self.request_timeout_s) + REPLY_GRACE_S

    def ask(
        self, actor: str, body: bytes, timeout: float | None, trace: TraceContext | None
    ) -> Outgoing:
        return self._request(
            lambda rid: Ask(rid, actor, msgspec.Raw(body), timeout, trace),
            self.reply_wait(timeout),
            counted=True,
        )

    def tell(self, actor: str, body: bytes, trace: TraceContext | None) -> Outgoing:
        return self._request(
            lambda rid: Tell(rid, actor, msgspec.Raw(body), trace),
            self.reply_wait(None),
            counted=True,
        )

    def control(self, op: str, timeout: float | None = None) -> Outgoing:
        """`status`, `tree`, `stop` or `ping` (anything else is a `ValueError`)."""
        make = _CONTROL.get(op)
        if make is None:
            raise ValueError(f"unknown op {op!r}")
        return self._request(make, self.reply_wait(timeout))

    def control_child(self, action: str, path: str, timeout: float | None) -> Outgoing:
        """Start, stop or restart the child at tree path `path`."""
        return self._request(
            lambda rid: ControlChild(rid, action, path, timeout),
            self.reply_wait(timeout),
            counted=True,  # the daemon counts it in flight, as an ask
        )

    def logs(self, path: str, since: float | None, follow: bool) -> Outgoing:
        """The daemon's kept log lines of `path` (and a follow stream's name)."""
        return self._request(lambda rid: GetLogs(rid, path, since, follow), self.reply_wait(None))

    def subscribe(self, stream: Subscription) -> Outgoing:
        """Ask for `stream`; it is live once its reply arrives (`Answered`)."""
        window = stream.window
        return self._request(
            lambda rid: Subscribe(rid, stream.name, window.messages, window.bytes),
            self.reply_wait(None),
            stream=stream,
        )

    def unsubscribe(self, stream: Subscription) -> Outgoing | None:
        """End `stream` here at once (what is buffered is dropped; taking raises
        `closed`) and, if the daemon holds it, the request that ends it there too."""
        sub = stream.sub
        live = sub is not None and stream.end is None and self.error is None
        stream._buffer.clear()
        stream._finish(PhloemError(ErrorKind.CLOSED, f"stream {stream.name!r} unsubscribed"))
        if not live or sub is None:
            return None
        self._subs.pop(sub, None)
        self._credit.pop(sub, None)
        try:
            return self._request(lambda rid: Unsubscribe(rid, sub), REPLY_GRACE_S)
        except PhloemError:  # no room to wait for the answer: end it without waiting
            self._unsubscribe.append(sub)
            return None

    def forget(self, rid: int) -> None:
        """The caller no longer waits for `rid` (it timed out or was cancelled): its late
        reply is dropped; a subscription it asked for is ended once it is accepted."""
        entry = self._pending.get(rid)
        if entry is None:
            return
        if entry.stream is not None:
            entry.stream.abandoned = True
        if entry.counted or entry.stream is not None:
            # An ask or tell is still in flight on the daemon until it answers; an
            # accepted subscription must be ended there: both wait for their reply.
            entry.waited = False
        else:
            del self._pending[rid]

    def abandon(self, stream: Subscription) -> None:
        """Nobody will read `stream`: end it on the daemon as soon as that is possible."""
        stream.abandoned = True
        if stream.sub is not None and stream.end is None:
            self._drop_sub(stream.sub)
        stream._buffer.clear()
        stream._finish(PhloemError(ErrorKind.CLOSED, f"stream {stream.name!r} closed"))

    def _request(
        self,
        make: Any,
        wait_s: float,
        *,
        counted: bool = False,
        stream: Subscription | None = None,
    ) -> Outgoing:
        self.check()
        if len(self._pending) >= self.max_outstanding:
            raise PhloemError(
                ErrorKind.BACKPRESSURE,
                f"{len(self._pending)} requests wait for replies on this connection "
                f"(max_outstanding {self.max_outstanding})",
            )
        rid = next(self._ids)
        frame = encode_frame(make(rid))
        if len(frame) - HEADER_BYTES > self.max_frame_bytes:
            raise PhloemError(
                ErrorKind.FRAME_TOO_LARGE,
                f"request of {len(frame)} bytes exceeds the daemon's "
                f"max_frame_bytes {self.max_frame_bytes}",
            )
        self._pending[rid] = _Pending(counted, stream)
        if counted:
            self._inflight += 1
        return Outgoing(rid, frame, wait_s)

    # -- streams -------------------------------------------------------------------------

    def take(self, stream: Subscription) -> bytes:
        """The next buffered event of `stream` (check `ready` first), or its end as a
        `PhloemError` (`closed` when it ended normally). Credit for what was taken is
        queued once half the window is consumed."""
        if not stream._buffer:
            if stream.end is None:
                raise RuntimeError("nothing to take: wait until the stream is ready")
            raise stream.end
        item = stream._buffer.popleft()
        stream._unacked_msgs += 1
        stream._unacked_bytes += len(item)
        if (
            stream._unacked_msgs >= stream._batch_msgs
            or stream._unacked_bytes >= stream._batch_bytes
        ):
            self.flush(stream)
        return item

    def flush(self, stream: Subscription) -> None:
        """Queue the credit owed for everything taken from `stream` (before waiting on
        it, so the daemon is never left waiting for credit the consumer already has)."""
        sub = stream.sub
        if not stream._unacked_msgs or sub not in self._subs:
            return
        msgs, nbytes = self._credit.get(sub, (0, 0))
        self._credit[sub] = (msgs + stream._unacked_msgs, nbytes + stream._unacked_bytes)
        stream._unacked_msgs = stream._unacked_bytes = 0

    def data_to_send(self) -> bytes:
        """The frames the protocol queued itself (credit, unsubscriptions); then empty."""
        if not self._credit and not self._unsubscribe:
            return b""
        out = []
        for sub, (msgs, nbytes) in self._credit.items():
            out.append(encode_frame(Credit(sub, msgs, nbytes)))
            self._subs[sub]._credited += msgs
        out += [encode_frame(Unsubscribe(next(self._ids), sub)) for sub in self._unsubscribe]
        self._credit.clear()
        self._unsubscribe.clear()
        return b"".join(out)

    def _drop_sub(self, sub: int) -> None:
        self._subs.pop(sub, None)
        self._credit.pop(sub, None)
        if self.error is None:
            self._unsubscribe.append(sub)  # its reply has no waiter: dropped

    # -- incoming ------------------------------------------------------------------------

    def receive(self, data: bytes) -> list[ProtocolEvent]:
        """Feed bytes read from the daemon; what they changed, in order."""
        if self.error is not None:
            return []
        events: list[ProtocolEvent] = []
        try:
            frames = self._frames.feed(data)
        except PhloemError as err:  # a header over the limit
            return [self.fail(err)]
        for frame in frames:
            try:
                self._dispatch(decode_server(frame), events)
            except PhloemError as err:
                events.append(self.fail(err))
                return events
        if self._frames.error is not None:  # a header over the limit behind these frames
            events.append(self.fail(self._frames.error))
        return events

    def fail(self, err: PhloemError) -> Failed:
        """End the connection with `err` (the first error stays the error): every
        stream ends with it, no reply will come."""
        if self.error is None:
            self.error = err
        err = self.error
        inflight, self._inflight = self._inflight, 0
        self._pending.clear()
        streams = list(self._subs.values())
        self._subs.clear()
        self._credit.clear()
        self._unsubscribe.clear()
        for stream in streams:
            stream._finish(err)
        return Failed(err, inflight, tuple(streams))

    def _dispatch(self, message: Any, events: list[ProtocolEvent]) -> None:
        kind = type(message)
        if kind is Event:
            stream = self._subs.get(message.sub)
            if stream is None:
                return  # ended here already: late events are dropped
            stream._received += 1
            if stream._received > stream.window.messages + stream._credited:
                raise PhloemError(ErrorKind.BAD_FRAME, "the daemon sent beyond the granted credit")
            stream._buffer.append(bytes(message.body))
            events.append(StreamChanged(stream))
        elif kind is Reply or kind is Fail:
            self._answered(message, events)
        elif kind is StreamEnd:
            stream = self._subs.pop(message.sub, None)
            self._credit.pop(message.sub, None)
            if stream is not None:
                if message.kind == "normal":
                    end = PhloemError(ErrorKind.CLOSED, f"stream {stream.name!r} ended")
                else:
                    detail = message.detail or message.kind
                    end = PhloemError(message.kind, f"stream {stream.name!r} ended: {detail}")
                stream._finish(end)
                events.append(StreamChanged(stream))
        elif kind is Welcome and self.welcome is None:
            self.welcome = message
            self.max_frame_bytes = message.max_frame_bytes
            self._frames.max_frame_bytes = min(
                max(message.max_frame_bytes, MIN_READ_FRAME_BYTES), MAX_FRAME_BYTES_LIMIT
            )
            self.request_timeout_s = message.request_timeout_s
            events.append(Welcomed(message))

    def _answered(self, message: Reply | Fail, events: list[ProtocolEvent]) -> None:
        rid = message.id
        if rid is None:  # an error about the whole connection; the daemon closes it
            assert isinstance(message, Fail)
            raise PhloemError.from_value(message.error)
        entry = self._pending.pop(rid, None)
        if entry is None:
            return  # nobody waits for it (an unsubscription of ours, or given up on)
        if entry.counted:
            self._inflight -= 1
        stream = entry.stream
        if stream is not None and isinstance(message, Reply):
            sub = msgspec.msgpack.decode(message.body, type=int)
            stream.sub = sub
            if stream.abandoned or stream.end is not None:
                self._unsubscribe.append(sub)
            else:
                self._subs[sub] = stream
        if entry.waited or entry.counted:
            events.append(Answered(rid, message, entry.counted))
