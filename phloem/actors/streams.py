"""Named event streams (topics) that clients subscribe to under credit.

A service opens a `Topic` by name (e.g. `planning/<ref>`), optionally bound to an owner
so that only that owner may subscribe, publishes msgspec structs or plain data to it, and
closes it with a reason when the work ends. Every published value is encoded to msgpack
once; each subscriber (a socket connection or an in-process receiver) gets those bytes
within its own credit window (see `phloem.supervision.credit`).
"""

from __future__ import annotations

import threading
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

_encoder = msgspec.msgpack.Encoder()


# A subscriber that grants no credit this long makes a run's event stream fail.
RUN_STREAM_SEND_TIMEOUT_S = 60.0


class RunStreamForwarder:
    """Sends a run's events to its topic under credit, as `wrap(event)`. The first send
    that fails (no credit within `timeout`, the topic gone) calls `cancel(reason)` once
    and later events are dropped: a run never outlives the stream its owner reads."""

    def __init__(
        self,
        topic: Topic,
        wrap: Callable[[Any], Any],
        cancel: Callable[[str], Any],
        timeout: float = RUN_STREAM_SEND_TIMEOUT_S,
    ) -> None:
        self.topic = topic
        self.wrap = wrap
        self.cancel = cancel
        self.timeout = timeout
        self.failed: str | None = None  # the kind of the send that failed

    def __call__(self, event: Any) -> None:
        if self.failed is not None:
            return
        try:
            self.topic.send(self.wrap(event), timeout=self.timeout)
        except PhloemError as exc:
            self.failed = exc.kind
            self.cancel(f"event stream failed: {exc.kind}")


class Topic:
    """A named stream of msgpack-encoded events. Publish from any thread."""

    def __init__(self, hub: StreamHub, name: str, owner: Owner | None, **limits: int) -> None:
        self._hub = hub
        self.name = name
        self.owner = owner
        self.stream: CreditStream[bytes] = CreditStream(name, size_of=len, **limits)

    def publish(self, event: Any) -> int:
        """Deliver or queue `event` for every subscriber, never blocking (slow ones are
        detached with `backpressure`); how many subscribers took it."""
        return self.stream.publish(_encoder.encode(event))

    def send(self, event: Any, timeout: float | None = None) -> int:
        """Wait (up to `timeout`) until every subscriber has room, then publish."""
        return self.stream.send(_encoder.encode(event), timeout)

    def close(self, reason: ExitReason | None = None) -> None:
        """End the stream for every subscriber and forget the name."""
        self._hub._forget(self)
        self.stream.close(reason)

    @property
    def closed(self) -> bool:
        return self.stream.closed

    def credit_in_use(self) -> int:
        return self.stream.credit_in_use()

    def __repr__(self) -> str:
        return f"<Topic {self.name!r} {self.stream.subscriber_count()} subscribers>"


class StreamHub:
    """The daemon's (or embedded tree's) registry of open topics, bounded in number."""

    def __init__(self, max_streams: int = DEFAULT_MAX_STREAMS) -> None:
        self.max_streams = check_range("max_streams", max_streams, *MAX_STREAMS_RANGE)
        self._lock = threading.Lock()
        self._topics: dict[str, Topic] = {}

    def open(self, name: str, *, owner: Owner | None = None, **limits: int) -> Topic:
        """Open a topic; with `owner`, only that owner may subscribe to it. `limits`
        (`max_subscribers`, `max_pending_messages`, `max_pending_bytes`) bound its
        subscribers as `CreditStream` does."""
        if not isinstance(name, str) or not name or len(name) > MAX_STREAM_NAME_CHARS:
            raise ValueError(f"name must be 1 to {MAX_STREAM_NAME_CHARS} characters")
        with self._lock:
            if name in self._topics:
                raise PhloemError(ErrorKind.STREAM_EXISTS, f"stream {name!r} is already open")
            if len(self._topics) >= self.max_streams:
                raise PhloemError(
                    ErrorKind.BACKPRESSURE, f"{len(self._topics)} streams open; max_streams reached"
                )
            topic = Topic(self, name, owner, **limits)
            self._topics[name] = topic
            return topic

    def get(self, name: str, owner: Owner) -> Topic:
        """The topic `name` if `owner` may subscribe: `unknown_stream` / `not_owner`."""
        with self._lock:
            topic = self._topics.get(name)
        if topic is None:
            raise PhloemError(ErrorKind.UNKNOWN_STREAM, f"no stream named {name[:80]!r}")
        if topic.owner is not None and topic.owner != owner:
            raise PhloemError(ErrorKind.NOT_OWNER, f"stream {name!r} belongs to another owner")
        return topic

    def owner_down(self, owner: Owner) -> int:
        """Close every topic bound to `owner` with reason `owner_down`."""
        with self._lock:
            owned = [t for t in self._topics.values() if t.owner == owner]
        for topic in owned:
            topic.close(ExitReason.owner_down())
        return len(owned)

    def close_all(self, reason: ExitReason | None = None) -> None:
        with self._lock:
            topics = list(self._topics.values())
        for topic in topics:
            topic.close(reason or ExitReason.shutdown())

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._topics)

    def __len__(self) -> int:
        with self._lock:
            return len(self._topics)

    def _forget(self, topic: Topic) -> None:
        with self._lock:
            if self._topics.get(topic.name) is topic:
                del self._topics[topic.name]
