"""Credit-based flow control: streams whose consumers set the pace.

A `CreditStream` broadcasts items to subscribers. Each subscriber grants a
`CreditWindow(messages, bytes)` (a wire value, `phloem.protocols.credit`); the stream
never has more than that many items or bytes delivered and not yet acknowledged (`ack`)
to it. Items that cannot be delivered yet wait in the subscriber's *pending* queue, which
is bounded too (messages and bytes); a subscriber whose pending queue would overflow is
detached with reason `backpressure` and told so through its `on_detach` callback.
Nothing here grows without bound.

Decisions worth knowing:
- Acks restore credit up to the window, never beyond: acking more than is outstanding
  clamps to what is outstanding.
- An item larger than a subscriber's byte window could never be delivered under credit.
  Rather than wait forever, that subscriber is detached at once with `backpressure`
  (detail `item of N bytes exceeds window of M bytes`). Pick windows at least as large as
  the largest item the stream carries.
- `deliver(item)` runs with the stream's lock held, in order, on the publishing (or
  acking) thread. It must not block; it may call back into the stream (the lock is
  re-entrant). If it raises, that subscriber is detached with an `exception` reason.
- `publish` never blocks (it queues or detaches); `send` waits up to a timeout until every
  subscriber can take the item without overflowing, for producers that prefer to slow
  down over losing a consumer.
- A stream made with `retain_messages` / `retain_bytes` keeps what it carries until its
  first subscriber arrives (a run that starts before its owner subscribes): at most that
  many items and bytes, the oldest dropped first and counted (the newest is always kept).
  The first subscriber gets them, after `missed(count)` when some were dropped — also
  from a stream already closed normally, which it then leaves once they are delivered.
  Later subscribers get only what is published after they arrive.

`CreditReceiver` is the in-process pull side (embedded users, tests): `recv(timeout)`
returns the next item and acks for you (lazily, in batches, always before it waits), or
acks only when you call `ack()`.

Size: one module on purpose — the stream, its per-subscriber accounting and the receiver
share one lock and one credit invariant (delivered minus acked never exceeds the window).
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import msgspec

from phloem.base.logs import get_logger
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.protocols.limits import check_range
from phloem.supervision.reasons import ExitKind, ExitReason

log = get_logger("phloem.supervision.credit")

T = TypeVar("T")

DEFAULT_PENDING_MESSAGES = 1_024
DEFAULT_PENDING_BYTES = 16 * 1024 * 1024
PENDING_MESSAGES_RANGE = (0, 1_000_000)
PENDING_BYTES_RANGE = (0, 4 * 1024 * 1024 * 1024)

DEFAULT_MAX_SUBSCRIBERS = 1_024
MAX_SUBSCRIBERS_RANGE = (1, 100_000)

RETAIN_MESSAGES_RANGE = (0, 1_000_000)
RETAIN_BYTES_RANGE = (0, 1024 * 1024 * 1024)


class CreditUsage(msgspec.Struct, frozen=True):
    """Outstanding (delivered, unacked) and pending (waiting for credit) totals."""

    subscribers: int = 0
    in_flight_messages: int = 0
    in_flight_bytes: int = 0
    pending_messages: int = 0
    pending_bytes: int = 0
    detached: int = 0


def default_size(item: object) -> int:
    """Byte size of an item: its length for bytes/str, else its msgpack encoding's."""
    if isinstance(item, bytes | bytearray | memoryview):
        return len(item)
    if isinstance(item, str):
        return len(item.encode())
    return len(msgspec.msgpack.encode(item))


class Subscription:
    """One subscriber's state. Hand it back to `ack` and `unsubscribe`."""

    __slots__ = (
        "_deliver",
        "_on_detach",
        "_pending",
        "_pending_bytes",
        "closing",
        "detach_reason",
        "id",
        "in_flight_bytes",
        "in_flight_messages",
        "max_pending_bytes",
        "max_pending_messages",
        "stream_name",
        "window",
    )

    def __init__(
        self,
        sub_id: int,
        stream_name: str,
        *,
        window: CreditWindow,
        deliver: Callable[[Any], None],
        on_detach: Callable[[ExitReason], None] | None,
        max_pending_messages: int,
        max_pending_bytes: int,
    ) -> None:
        self.id = sub_id
        self.stream_name = stream_name
        self.window = window
        self._deliver = deliver
        self._on_detach = on_detach
        self.max_pending_messages = max_pending_messages
        self.max_pending_bytes = max_pending_bytes
        self.in_flight_messages = 0
        self.in_flight_bytes = 0
        self._pending: collections.deque[tuple[Any, int]] = collections.deque()
        self._pending_bytes = 0
        self.detach_reason: ExitReason | None = None
        self.closing: ExitReason | None = None  # stream ended; detach once pending drains

    @property
    def attached(self) -> bool:
        return self.detach_reason is None

    @property
    def pending_messages(self) -> int:
        return len(self._pending)

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    def _fits(self, size: int) -> bool:
        return (
            self.in_flight_messages < self.window.messages
            and self.in_flight_bytes + size <= self.window.bytes
        )

    def _has_room(self, size: int) -> bool:
        """Could `size` more bytes be accepted now, delivered or queued, without overflow?"""
        if not self._pending and self._fits(size):
            return True
        return (
            len(self._pending) < self.max_pending_messages
            and self._pending_bytes + size <= self.max_pending_bytes
        )

    def __repr__(self) -> str:
        return (
            f"<Subscription {self.stream_name}#{self.id} "
            f"{self.in_flight_messages}/{self.window.messages} msgs "
            f"{self.in_flight_bytes}/{self.window.bytes} B, {len(self._pending)} pending>"
        )


_Post = list[Callable[[], None]]


class CreditStream(Generic[T]):
    """A broadcaster that delivers to each subscriber only within its granted credit."""

    def __init__(
        self,
        name: str = "stream",
        *,
        size_of: Callable[[T], int] = default_size,
        max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS,
        max_pending_messages: int = DEFAULT_PENDING_MESSAGES,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
        retain_messages: int = 0,
        retain_bytes: int = 0,
        missed: Callable[[int], T] | None = None,
    ) -> None:
        self.name = name
        self._size_of = size_of
        self.max_subscribers = check_range(
            "max_subscribers", max_subscribers, *MAX_SUBSCRIBERS_RANGE
        )
        # Each subscriber's pending queue bound unless `subscribe` names its own.
        self.max_pending_messages = check_range(
            "max_pending_messages", max_pending_messages, *PENDING_MESSAGES_RANGE
        )
        self.max_pending_bytes = check_range(
            "max_pending_bytes", max_pending_bytes, *PENDING_BYTES_RANGE
        )
        # Called (outside the lock, on the subscribing thread) after each new subscriber.
        self.on_subscribe: Callable[[], None] | None = None
        self._lock = threading.RLock()
        # Made by the first producer that waits for room (most streams never do: a
        # Condition holds a waiter deque, ~0.8 KiB, and a waiting run owns a stream).
        self._room: threading.Condition | None = None
        self._subs: dict[int, Subscription] = {}
        self._ids = itertools.count(1)
        self._closed: ExitReason | None = None
        self._detached_total = 0
        self._room_waiters = 0  # producers waiting in `send` / `wait_for_subscribers`
        # Kept for the first subscriber (None: not retaining, or handed over already).
        self.retain_messages = check_range(
            "retain_messages", retain_messages, *RETAIN_MESSAGES_RANGE
        )
        self.retain_bytes = check_range("retain_bytes", retain_bytes, *RETAIN_BYTES_RANGE)
        self._retained: collections.deque[tuple[Any, int]] | None = (
            collections.deque() if retain_messages > 0 else None
        )
        self._retained_bytes = 0
        self._missed = missed
        self.missed_count = 0  # retained items dropped before the first subscriber came

    # -- subscribing ---------------------------------------------------------------------

    def subscribe(
        self,
        window: CreditWindow,
        deliver: Callable[[T], None],
        on_detach: Callable[[ExitReason], None] | None = None,
        *,
        max_pending_messages: int | None = None,
        max_pending_bytes: int | None = None,
    ) -> Subscription:
        """Add a consumer with `window` credit; `deliver(item)` is called per item.
        Its pending queue is bounded by the stream's limits unless given here."""
        if not isinstance(window, CreditWindow):
            raise TypeError("window must be a CreditWindow")
        if not callable(deliver):
            raise TypeError("deliver must be callable")
        if max_pending_messages is None:
            max_pending_messages = self.max_pending_messages
        if max_pending_bytes is None:
            max_pending_bytes = self.max_pending_bytes
        check_range("max_pending_messages", max_pending_messages, *PENDING_MESSAGES_RANGE)
        check_range("max_pending_bytes", max_pending_bytes, *PENDING_BYTES_RANGE)
        post: _Post = []
        with self._lock:
            if self._closed is not None and not self.unread:
                raise PhloemError("closed", f"stream {self.name!r} is closed")
            if len(self._subs) >= self.max_subscribers:
                raise PhloemError(
                    "backpressure",
                    f"stream {self.name!r} has {len(self._subs)} subscribers; "
                    f"max_subscribers is {self.max_subscribers}",
                )
            sub = Subscription(
                next(self._ids),
                self.name,
                window=window,
                deliver=deliver,
                on_detach=on_detach,
                max_pending_messages=max_pending_messages,
                max_pending_bytes=max_pending_bytes,
            )
            self._subs[sub.id] = sub
            if self._retained is not None:
                self._hand_over(sub, post)
            self._wake_room()
        _run(post)
        hook = self.on_subscribe
        if hook is not None:
            try:
                hook()
            except Exception:
                log.exception("credit_on_subscribe_failed", stream=self.name)
        return sub

    def receiver(
        self,
        window: CreditWindow | None = None,
        *,
        auto_ack: bool = True,
        max_pending_messages: int | None = None,
        max_pending_bytes: int | None = None,
    ) -> CreditReceiver[T]:
        """Subscribe an in-process pull consumer."""
        return CreditReceiver(
            self,
            window or CreditWindow(),
            auto_ack=auto_ack,
            max_pending_messages=(
                self.max_pending_messages if max_pending_messages is None else max_pending_messages
            ),
            max_pending_bytes=(
                self.max_pending_bytes if max_pending_bytes is None else max_pending_bytes
            ),
        )

    def unsubscribe(self, sub: Subscription, reason: ExitReason | None = None) -> None:
        """Detach `sub` (reason `normal` unless given); pending items are dropped."""
        post: _Post = []
        with self._lock:
            self._detach(sub, reason or ExitReason.normal(), post)
        _run(post)

    # -- producing -----------------------------------------------------------------------

    def publish(self, item: T) -> int:
        """Deliver or queue `item` for every subscriber, never blocking.

        A subscriber that cannot take it (pending queue full, or item larger than its
        byte window) is detached with `backpressure`. Returns how many subscribers
        received or queued the item.
        """
        size = self._size_of(item)
        post: _Post = []
        with self._lock:
            if self._closed is not None:
                raise PhloemError("closed", f"stream {self.name!r} is closed")
            count = 0
            for sub in list(self._subs.values()):
                if self._offer(sub, item, size, post):
                    count += 1
            self._retain(item, size)
        _run(post)
        return count

    def send(self, item: T, timeout: float | None = None) -> int:
        """Like `publish`, but first wait until every subscriber has room for `item`.

        Raises `PhloemError("timeout")` (item not published) if room does not appear
        within `timeout` seconds. Subscribers whose window can never hold the item are
        detached rather than waited for.
        """
        size = self._size_of(item)
        deadline = None if timeout is None else time.monotonic() + timeout
        post: _Post = []
        count = -1
        with self._lock:
            while True:
                if self._closed is not None:
                    raise PhloemError("closed", f"stream {self.name!r} is closed")
                blocked = False
                for sub in list(self._subs.values()):
                    if size > sub.window.bytes:
                        self._detach(sub, _too_large(size, sub.window), post)
                    elif not sub._has_room(size):
                        blocked = True
                if not blocked:
                    count = 0
                    for sub in list(self._subs.values()):
                        if self._offer(sub, item, size, post):
                            count += 1
                    self._retain(item, size)
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._room_waiters += 1
                try:
                    self._wait_for_room(remaining)
                finally:
                    self._room_waiters -= 1
        _run(post)
        if count < 0:
            raise PhloemError("timeout", f"no room in stream {self.name!r} within {timeout} s")
        return count

    def ack(self, sub: Subscription, messages: int = 1, nbytes: int | None = None) -> None:
        """Restore credit: `messages` items and `nbytes` bytes consumed (clamped).

        `nbytes=None` acks every outstanding byte when all outstanding messages are
        acked, else none: consumers that track bytes should pass them.
        """
        check_range("messages", messages, 0, None)
        if nbytes is not None:
            check_range("bytes", nbytes, 0, None)
        post: _Post = []
        with self._lock:
            if sub.detach_reason is not None or self._subs.get(sub.id) is not sub:
                return
            sub.in_flight_messages -= min(messages, sub.in_flight_messages)
            if nbytes is None:
                nbytes = sub.in_flight_bytes if sub.in_flight_messages == 0 else 0
            sub.in_flight_bytes -= min(nbytes, sub.in_flight_bytes)
            self._drain(sub, post)
            if self._room_waiters:
                self._wake_room()
        _run(post)

    def close(self, reason: ExitReason | None = None) -> None:
        """End the stream and refuse new items.

        With a `normal` reason (the default) each subscriber first receives what is
        still pending for it, as its credit allows, and is detached after the last
        item; with any other reason every subscriber is detached at once.
        """
        post: _Post = []
        with self._lock:
            if self._closed is not None:
                return
            self._closed = reason or ExitReason.normal()
            for sub in list(self._subs.values()):
                if self._closed.kind is ExitKind.NORMAL and sub._pending:
                    sub.closing = self._closed
                else:
                    self._detach(sub, self._closed, post)
            self._wake_room()
        _run(post)

    def discard_pending(self, predicate: Callable[[T], bool]) -> int:
        """Drop every item not yet delivered (waiting for credit) for which `predicate`
        is true, from every subscriber's pending queue; how many were dropped."""
        dropped = 0
        with self._lock:
            for sub in self._subs.values():
                if not sub._pending:
                    continue
                kept: collections.deque[tuple[Any, int]] = collections.deque()
                for item, size in sub._pending:
                    if predicate(item):
                        dropped += 1
                        sub._pending_bytes -= size
                    else:
                        kept.append((item, size))
                sub._pending = kept
            self._wake_room()
        return dropped

    # -- readings ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def retaining(self) -> bool:
        """Whether items are being kept for a first subscriber that has not come yet."""
        return self._retained is not None

    @property
    def unread(self) -> bool:
        """Closed normally with items kept for a first subscriber that has not come yet."""
        closed = self._closed
        return self._retained is not None and closed is not None and closed.kind is ExitKind.NORMAL

    def retained(self) -> int:
        """Items kept for the first subscriber (0 once one came)."""
        with self._lock:
            return len(self._retained) if self._retained is not None else 0

    def drop_retained(self) -> int:
        """Stop keeping items for a first subscriber (nobody will come); how many went."""
        with self._lock:
            kept, self._retained = self._retained, None
            self._retained_bytes = 0
            return len(kept) if kept is not None else 0

    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subs)

    def wait_for_subscribers(self, count: int = 1, timeout: float | None = None) -> bool:
        """Wait until at least `count` subscribers are attached (or the stream closed);
        False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while len(self._subs) < count and self._closed is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._room_waiters += 1
                try:
                    self._wait_for_room(remaining)
                finally:
                    self._room_waiters -= 1
            return len(self._subs) >= count

    def _wait_for_room(self, timeout: float | None) -> None:
        """Wait (lock held) until room may have been made, or `timeout` passed."""
        room = self._room
        if room is None:
            room = self._room = threading.Condition(self._lock)
        room.wait(timeout)

    def _wake_room(self) -> None:
        """Wake (lock held) the producers waiting for room, if any ever waited."""
        room = self._room
        if room is not None:
            room.notify_all()

    def usage(self) -> CreditUsage:
        with self._lock:
            subs = list(self._subs.values())
            return CreditUsage(
                subscribers=len(subs),
                in_flight_messages=sum(s.in_flight_messages for s in subs),
                in_flight_bytes=sum(s.in_flight_bytes for s in subs),
                pending_messages=sum(len(s._pending) for s in subs),
                pending_bytes=sum(s._pending_bytes for s in subs),
                detached=self._detached_total,
            )

    def credit_in_use(self) -> int:
        """Messages delivered and not yet acked, over all subscribers (for snapshots)."""
        with self._lock:
            return sum(s.in_flight_messages for s in self._subs.values())

    # -- internals (lock held) -----------------------------------------------------------

    def _offer(self, sub: Subscription, item: Any, size: int, post: _Post) -> bool:
        if sub.detach_reason is not None:
            return False
        if size > sub.window.bytes:
            self._detach(sub, _too_large(size, sub.window), post)
            return False
        if not sub._pending and sub._fits(size):
            return self._deliver(sub, item, size, post)
        if (
            len(sub._pending) >= sub.max_pending_messages
            or sub._pending_bytes + size > sub.max_pending_bytes
        ):
            self._detach(
                sub,
                ExitReason.backpressure(
                    f"pending queue full: {len(sub._pending)} items, "
                    f"{sub._pending_bytes} bytes (max {sub.max_pending_messages} items, "
                    f"{sub.max_pending_bytes} bytes)"
                ),
                post,
            )
            return False
        sub._pending.append((item, size))
        sub._pending_bytes += size
        return True

    def _retain(self, item: Any, size: int) -> None:
        """Keep `item` for the first subscriber, within the retain bounds (oldest go first;
        the newest always stays)."""
        kept = self._retained
        if kept is None:
            return
        kept.append((item, size))
        self._retained_bytes += size
        while len(kept) > 1 and (
            len(kept) > self.retain_messages or self._retained_bytes > self.retain_bytes
        ):
            _, dropped = kept.popleft()
            self._retained_bytes -= dropped
            self.missed_count += 1

    def _hand_over(self, sub: Subscription, post: _Post) -> None:
        """Give the first subscriber what was kept for it (`missed(count)` first), past its
        pending bound (the retain bounds hold it), then deliver what its credit allows."""
        kept, self._retained = self._retained, None
        self._retained_bytes = 0
        assert kept is not None
        if self.missed_count and self._missed is not None:
            gap = self._missed(self.missed_count)
            kept.appendleft((gap, self._size_of(gap)))
        for item, size in kept:
            if size > sub.window.bytes:
                self._detach(sub, _too_large(size, sub.window), post)
                return
            sub._pending.append((item, size))
            sub._pending_bytes += size
        if self._closed is not None:
            sub.closing = self._closed
        self._drain(sub, post)

    def _deliver(self, sub: Subscription, item: Any, size: int, post: _Post) -> bool:
        sub.in_flight_messages += 1
        sub.in_flight_bytes += size
        try:
            sub._deliver(item)
        except Exception as exc:
            log.warning("credit_deliver_failed", stream=self.name, error=type(exc).__name__)
            self._detach(sub, ExitReason.from_exception(exc), post)
            return False
        return True

    def _drain(self, sub: Subscription, post: _Post) -> None:
        while sub._pending and sub.detach_reason is None:
            item, size = sub._pending[0]
            if not sub._fits(size):
                return
            sub._pending.popleft()
            sub._pending_bytes -= size
            self._deliver(sub, item, size, post)
        if sub.closing is not None and not sub._pending:
            self._detach(sub, sub.closing, post)

    def _detach(self, sub: Subscription, reason: ExitReason, post: _Post) -> None:
        if sub.detach_reason is not None:
            return
        sub.detach_reason = reason
        self._subs.pop(sub.id, None)
        sub._pending.clear()
        sub._pending_bytes = 0
        self._detached_total += 1
        self._wake_room()
        if reason.kind is not ExitKind.NORMAL:
            log.info("credit_subscriber_detached", stream=self.name, reason=str(reason))
        callback = sub._on_detach
        if callback is not None:
            post.append(lambda: callback(reason))

    def __repr__(self) -> str:
        u = self.usage()
        return (
            f"<CreditStream {self.name!r} {u.subscribers} subscribers, "
            f"{u.in_flight_messages} in flight, {u.pending_messages} pending>"
        )


def _too_large(size: int, window: CreditWindow) -> ExitReason:
    return ExitReason.backpressure(f"item of {size} bytes exceeds window of {window.bytes} bytes")


def _run(post: _Post) -> None:
    for fn in post:
        try:
            fn()
        except Exception:
            log.exception("credit_on_detach_failed")


class CreditReceiver(Generic[T]):
    """An in-process pull consumer of a `CreditStream`.

    Its buffer holds at most the window, because the stream never delivers beyond it.
    With `auto_ack=True` (default) items are acked as they are received, in batches, and
    always before `recv` waits, so the producer never stalls on an unsent ack. With
    `auto_ack=False` call `ack(count)` once you have dealt with the oldest items.
    """

    def __init__(
        self,
        stream: CreditStream[T],
        window: CreditWindow,
        *,
        auto_ack: bool = True,
        max_pending_messages: int = DEFAULT_PENDING_MESSAGES,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
    ) -> None:
        self._stream = stream
        self._lock = stream._lock
        self._ready = threading.Condition(self._lock)
        self._buffer: collections.deque[tuple[T, int]] = collections.deque()
        self._auto_ack = auto_ack
        self._unacked: collections.deque[int] = collections.deque()  # sizes, oldest first
        self._unacked_msgs = 0  # auto mode: received, not yet acked
        self._unacked_bytes = 0
        self._batch_msgs = max(1, window.messages // 2)
        self._batch_bytes = max(1, window.bytes // 2)
        self._reason: ExitReason | None = None
        self._waiting = False  # a thread is blocked in recv
        self._size_of = stream._size_of
        self.subscription = stream.subscribe(
            window,
            self._on_item,
            self._on_detach,
            max_pending_messages=max_pending_messages,
            max_pending_bytes=max_pending_bytes,
        )

    # called by the stream with its lock held
    def _on_item(self, item: T) -> None:
        self._buffer.append((item, self._size_of(item)))
        if self._waiting:
            self._ready.notify()

    def _on_detach(self, reason: ExitReason) -> None:
        with self._lock:
            self._reason = reason
            self._ready.notify_all()

    def recv(self, timeout: float | None = None) -> T:
        """The next item. Raises `PhloemError` with kind `timeout` if none arrives in
        time, `closed` once the stream ended normally and the buffer is empty, or the
        detach reason's kind (e.g. `backpressure`) if this receiver was detached."""
        with self._lock:
            if not self._buffer:
                self._flush()
                deadline = None if timeout is None else time.monotonic() + timeout
                while not self._buffer:
                    if self._reason is not None:
                        raise self._ended_error()
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise PhloemError("timeout", f"no item within {timeout} s")
                    self._waiting = True
                    try:
                        self._ready.wait(remaining)
                    finally:
                        self._waiting = False
            item, size = self._buffer.popleft()
            if self._auto_ack:
                self._unacked_msgs += 1
                self._unacked_bytes += size
                if (
                    self._unacked_msgs >= self._batch_msgs
                    or self._unacked_bytes >= self._batch_bytes
                ):
                    self._flush()
            else:
                self._unacked.append(size)
            return item

    def ack(self, count: int = 1) -> None:
        """Manual mode: acknowledge the `count` oldest received items (clamped)."""
        check_range("count", count, 0, None)
        with self._lock:
            n = min(count, len(self._unacked))
            nbytes = sum(self._unacked.popleft() for _ in range(n))
            if n:
                self._stream.ack(self.subscription, n, nbytes)

    def _flush(self) -> None:
        if self._unacked_msgs:
            msgs, nbytes = self._unacked_msgs, self._unacked_bytes
            self._unacked_msgs = self._unacked_bytes = 0
            self._stream.ack(self.subscription, msgs, nbytes)

    def _ended_error(self) -> PhloemError:
        reason = self._reason
        assert reason is not None
        if reason.kind is ExitKind.NORMAL:
            return PhloemError("closed", f"stream {self._stream.name!r} ended")
        return PhloemError(
            reason.kind.value, f"receiver detached from {self._stream.name!r}: {reason}"
        )

    @property
    def detach_reason(self) -> ExitReason | None:
        return self._reason

    def buffered(self) -> int:
        with self._lock:
            return len(self._buffer)

    def close(self) -> None:
        """Unsubscribe (pending items are dropped)."""
        self._stream.unsubscribe(self.subscription)

    def __iter__(self) -> Iterator[T]:
        """Items until the stream ends normally; abnormal detach raises `PhloemError`."""
        while True:
            try:
                yield self.recv()
            except PhloemError as err:
                if err.kind == "closed":
                    return
                raise

    def __enter__(self) -> CreditReceiver[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
