"""The in-process transport: direct calls into an embedded `Tree`, with the socket's semantics."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import msgspec

from phloem.base import telemetry
from phloem.client.base import StreamSource
from phloem.client.protocol import REPLY_GRACE_S
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.logs import LogsQuery
from phloem.protocols.wire import CHILD_OP, NIL

if TYPE_CHECKING:
    from phloem.supervision.credit import CreditReceiver
    from phloem.supervision.refs import Owner
    from phloem.tree import Tree


class _Slot:
    __slots__ = ("_event", "outcome")

    def __init__(self) -> None:
        self._event = threading.Event()
        self.outcome: tuple[bool, bytes | ErrorValue] | None = None

    def set(self, outcome: tuple[bool, bytes | ErrorValue]) -> None:
        self.outcome = outcome
        self._event.set()

    def wait(self, timeout: float | None) -> tuple[bool, bytes | ErrorValue]:
        if not self._event.wait(timeout) or self.outcome is None:
            raise PhloemError(ErrorKind.TIMEOUT, "no reply in time")
        return self.outcome


def _outcome(outcome: tuple[bool, bytes | ErrorValue]) -> bytes:
    """The reply body of an outcome; its error raised."""
    ok, value = outcome
    if not ok:
        assert isinstance(value, ErrorValue)
        raise PhloemError.from_value(value)
    assert isinstance(value, bytes)
    return value


class LocalStream:
    """An in-process subscription: a `CreditReceiver` over the topic's stream."""

    def __init__(self, receiver: CreditReceiver[bytes], name: str) -> None:
        self._rx = receiver
        self.name = name

    def recv(self, timeout: float | None = None) -> bytes:
        try:
            return self._rx.recv(timeout)
        except PhloemError as err:
            if err.kind == ErrorKind.TIMEOUT:
                raise PhloemError(ErrorKind.TIMEOUT, f"no event within {timeout} s") from err
            raise

    def close(self) -> None:
        self._rx.close()


class LocalTransport:
    """Direct calls into a `Tree` in this process, with the socket path's semantics."""

    def __init__(self, tree: Tree, owner: Owner) -> None:
        self._tree = tree
        self.owner = owner
        self._closed = False
        self._streams: list[LocalStream] = []
        self._lock = threading.Lock()

    def request(self, op: str, actor: str, body: bytes, timeout: float | None) -> bytes:
        if self._closed:
            raise PhloemError(ErrorKind.CLOSED, "the client is closed")
        tree = self._tree
        if op.endswith(CHILD_OP):
            slot = _Slot()
            tree.control(op.removesuffix(CHILD_OP), actor, timeout, slot.set)
            return _outcome(slot.wait(tree._timeout(timeout) + REPLY_GRACE_S))
        if op == "logs":
            query = msgspec.msgpack.decode(body, type=LogsQuery)
            return msgspec.msgpack.encode(tree.logs(self.owner, actor, query.since, query.follow))
        if op in ("ask", "tell"):
            slot = _Slot()
            tree.call(
                self.owner,
                actor,
                body,
                timeout,
                slot.set,
                tell=op == "tell",
                trace=telemetry.carrier(),
            )
            return _outcome(slot.wait(tree._timeout(timeout) + REPLY_GRACE_S))
        if op == "status":
            return msgspec.msgpack.encode(tree.status())
        if op == "tree":
            return msgspec.msgpack.encode(tree.snapshot())
        if op == "ping":
            return bytes(NIL)
        if op == "stop":
            raise PhloemError(ErrorKind.UNSUPPORTED, "an embedded tree is stopped by its owner")
        raise ValueError(f"unknown op {op!r}")

    def subscribe(self, stream: str, window: CreditWindow) -> StreamSource:
        if self._closed:
            raise PhloemError(ErrorKind.CLOSED, "the client is closed")
        topic = self._tree.streams.get(stream, self.owner)
        local = LocalStream(topic.stream.receiver(window), stream)
        with self._lock:
            self._streams.append(local)
        return local

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            streams, self._streams = self._streams, []
        for s in streams:
            s.close()
        self._tree.owner_down(self.owner)

    @property
    def closed(self) -> bool:
        return self._closed
