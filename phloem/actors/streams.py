"""Named event streams (topics) that clients subscribe to under credit.

A service opens a `Topic` by name (e.g. `planning/<ref>`), optionally bound to an owner
so that only that owner may subscribe, publishes msgspec structs or plain data to it, and
closes it with a reason when the work ends. Every published value is encoded to msgpack
once; each subscriber (a socket connection or an in-process receiver) gets those bytes
within its own credit window (see `phloem.supervision.credit`).

A topic opened with `retain_messages` keeps what it carries until its first subscriber
comes (a run's events, published before its owner subscribed). Closed normally before
that subscriber came, it stays in the hub — *unread* — until the subscriber takes it, its
owner goes away, or it is the oldest of more than `max_unread` unread topics.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.wire import MAX_STREAM_NAME_CHARS
from phloem.supervision.credit import CreditStream
from phloem.supervision.reasons import ExitReason
from phloem.supervision.refs import Owner

DEFAULT_MAX_STREAMS = 10_000
MAX_STREAMS_RANGE = (1, 1_000_000)
DEFAULT_MAX_UNREAD = 256
"""Closed topics kept for a first subscriber that has not come yet (oldest dropped)."""
MAX_UNREAD_RANGE = (0, 100_000)

_encoder = msgspec.msgpack.Encoder()


class Topic:
    """A named stream of msgpack-encoded events. Publish from any thread."""

    def __init__(
        self,
        hub: StreamHub,
        name: str,
        owner: Owner | None,
        missed: Callable[[int], Any] | None = None,
        **limits: int,
    ) -> None:
        self._hub = hub
        self.name = name
        self.owner = owner
        gap = None if missed is None else (lambda n: _encoder.encode(missed(n)))
        self.stream: CreditStream[bytes] = CreditStream(name, size_of=len, missed=gap, **limits)

    def publish(self, event: Any) -> int:
        """Deliver or queue `event` for every subscriber, never blocking (slow ones are
        detached with `backpressure`); how many subscribers took it."""
        return self.stream.publish(_encoder.encode(event))

    def send(self, event: Any, timeout: float | None = None) -> int:
        """Wait (up to `timeout`) until every subscriber has room, then publish."""
        return self.stream.send(_encoder.encode(event), timeout)

    def close(self, reason: ExitReason | None = None) -> None:
        """End the stream for every subscriber and forget the name — unless it closes
        normally with events kept for a first subscriber: then it stays, unread."""
        self.stream.close(reason)
        if self.stream.unread:
            self._hub._keep_unread(self)
        else:
            self._hub._forget(self)

    def forget(self) -> None:
        """Close it and drop what it keeps for a first subscriber (nobody will read it)."""
        self.stream.drop_retained()
        self.close(ExitReason.shutdown())

    @property
    def closed(self) -> bool:
        return self.stream.closed

    def credit_in_use(self) -> int:
        return self.stream.credit_in_use()

    def __repr__(self) -> str:
        return f"<Topic {self.name!r} {self.stream.subscriber_count()} subscribers>"


class StreamHub:
    """The daemon's (or embedded tree's) registry of open topics, bounded in number."""

    def __init__(
        self, max_streams: int = DEFAULT_MAX_STREAMS, max_unread: int = DEFAULT_MAX_UNREAD
    ) -> None:
        self.max_streams = check_range("max_streams", max_streams, *MAX_STREAMS_RANGE)
        self.max_unread = check_range("max_unread", max_unread, *MAX_UNREAD_RANGE)
        self._lock = threading.Lock()
        self._topics: dict[str, Topic] = {}
        self._unread: OrderedDict[str, Topic] = OrderedDict()  # closed, kept for a reader
        self.unread_dropped = 0  # unread topics dropped as the oldest beyond `max_unread`

    def open(
        self,
        name: str,
        *,
        owner: Owner | None = None,
        missed: Callable[[int], Any] | None = None,
        **limits: int,
    ) -> Topic:
        """Open a topic; with `owner`, only that owner may subscribe to it. `limits`
        (`max_subscribers`, `max_pending_messages`, `max_pending_bytes`,
        `retain_messages`, `retain_bytes`) bound it as `CreditStream` does; `missed(n)`
        is the event that tells a first subscriber `n` kept events were dropped."""
        if not isinstance(name, str) or not name or len(name) > MAX_STREAM_NAME_CHARS:
            raise ValueError(f"name must be 1 to {MAX_STREAM_NAME_CHARS} characters")
        with self._lock:
            if name in self._topics or name in self._unread:
                raise PhloemError(ErrorKind.STREAM_EXISTS, f"stream {name!r} is already open")
            if len(self._topics) >= self.max_streams:
                raise PhloemError(
                    ErrorKind.BACKPRESSURE, f"{len(self._topics)} streams open; max_streams reached"
                )
            topic = Topic(self, name, owner, missed, **limits)
            self._topics[name] = topic
            return topic

    def get(self, name: str, owner: Owner) -> Topic:
        """The topic `name` if `owner` may subscribe: `unknown_stream` / `not_owner`."""
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                topic = self._unread.get(name)
                if topic is not None and not topic.stream.unread:  # its reader took it
                    del self._unread[name]
                    topic = None
        if topic is None:
            raise PhloemError(ErrorKind.UNKNOWN_STREAM, f"no stream named {name[:80]!r}")
        if topic.owner is not None and topic.owner != owner:
            raise PhloemError(ErrorKind.NOT_OWNER, f"stream {name!r} belongs to another owner")
        return topic

    def owner_down(self, owner: Owner) -> int:
        """Close every topic bound to `owner` with reason `owner_down` (and drop the
        unread ones it will never read)."""
        with self._lock:
            owned = [t for t in self._topics.values() if t.owner == owner]
            unread = [t for t in self._unread.values() if t.owner == owner]
            for topic in unread:
                del self._unread[topic.name]
        for topic in unread:
            topic.stream.drop_retained()
        for topic in owned:
            topic.close(ExitReason.owner_down())
        return len(owned) + len(unread)

    def close_all(self, reason: ExitReason | None = None) -> None:
        with self._lock:
            topics = list(self._topics.values())
            unread = list(self._unread.values())
            self._unread.clear()
        for topic in unread:
            topic.stream.drop_retained()
        for topic in topics:
            topic.close(reason or ExitReason.shutdown())

    def names(self) -> list[str]:
        with self._lock:
            return sorted([*self._topics, *self._unread])

    def unread(self) -> int:
        """Closed topics still kept for their first subscriber."""
        with self._lock:
            return sum(1 for t in self._unread.values() if t.stream.unread)

    def __len__(self) -> int:
        with self._lock:
            return len(self._topics) + len(self._unread)

    def _forget(self, topic: Topic) -> None:
        with self._lock:
            if self._topics.get(topic.name) is topic:
                del self._topics[topic.name]
            if self._unread.get(topic.name) is topic:
                del self._unread[topic.name]

    def _keep_unread(self, topic: Topic) -> None:
        """`topic` closed unread: keep it for its reader, within `max_unread`."""
        dropped: list[Topic] = []
        with self._lock:
            if self._topics.get(topic.name) is topic:
                del self._topics[topic.name]
            for name in [n for n, t in self._unread.items() if not t.stream.unread]:
                del self._unread[name]  # taken by their readers since
            self._unread[topic.name] = topic
            while len(self._unread) > self.max_unread:
                _, oldest = self._unread.popitem(last=False)
                dropped.append(oldest)
                self.unread_dropped += 1
        for old in dropped:
            old.stream.drop_retained()
