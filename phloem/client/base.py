"""`ClientBase`: the client API written once over an abstract transport.

`phloem.Client` is `ClientBase` plus the feature mixins; its transport is either a Unix
socket to a daemon (`Client.connect`) or the in-process tree (`tree.client()`). Feature
methods are written once as a mixin subclassing `ClientBase`, on top of `ask`, `tell` and
`subscribe`:

    class PlanningMethods(ClientBase):
        def start_planning(self, plan: Plan, *, timeout: float | None = None) -> str:
            started = self.ask("planning", StartPlanning(plan=plan), reply_type=Started)
            return started.ref

and then listed among the bases of `phloem.client.Client`. Messages are msgspec structs
or plain data, encoded as msgpack; replies are decoded into `reply_type`.
"""

from __future__ import annotations

import abc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

import msgspec

from phloem.base.paths import SOCKET_ENV, default_socket_path
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.snapshot import TreeSnapshot
from phloem.protocols.wire import DaemonStatus, TraceContext

if TYPE_CHECKING:
    from phloem.client.aiostream import AsyncEventStream

T = TypeVar("T")

_encoder = msgspec.msgpack.Encoder()
_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def decode_as(data: bytes, type_: Any) -> Any:
    """Decode msgpack `data` into `type_` (a cached decoder per type)."""
    decoder = _decoders.get(type_)
    if decoder is None:
        decoder = _decoders[type_] = msgspec.msgpack.Decoder(type_)
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PhloemError(
            ErrorKind.BAD_MESSAGE, f"reply does not match the expected type: {exc}"
        ) from exc
    except RecursionError:
        raise PhloemError(ErrorKind.BAD_MESSAGE, "reply nested too deeply to decode") from None


def resolve_socket_path(path: str | os.PathLike[str] | None) -> Path:
    """`path`, else `$PHLOEM_SOCKET`, else the default config's socket path."""
    if path is not None:
        return Path(path)
    env = os.environ.get(SOCKET_ENV)
    if env:
        return Path(env)
    return default_socket_path()


def trace_context() -> TraceContext | None:
    """The caller's W3C trace context, for a request's envelope (None: nothing to carry).

    Without OpenTelemetry loaded in this process no span can be current, so there is
    nothing to carry, and a CLI command does not pay the ~50 ms its import costs."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from phloem.base import telemetry

    return TraceContext.from_carrier(telemetry.carrier())


class StreamSource(Protocol):
    """The transport side of a subscription: raw msgpack events under credit."""

    def recv(self, timeout: float | None) -> bytes:
        """The next event; raises `PhloemError` (`timeout`, `closed`, or the end kind)."""

    def close(self) -> None: ...


class Transport(Protocol):
    """How a client reaches a tree: a socket or a direct call."""

    def request(self, op: str, actor: str, body: bytes, timeout: float | None) -> bytes:
        """Perform `op` (`ask`, `tell`, `status`, `tree`, `stop`, `ping`, `logs`, or
        `start_child` / `stop_child` / `restart_child` with the path as `actor`); the reply
        body."""

    def subscribe(self, stream: str, window: CreditWindow) -> StreamSource: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


class EventStream(Generic[T]):
    """Events of a subscription, decoded into `event_type`.

    Iterate it (ends when the stream ends normally; an abnormal end such as
    `backpressure` or `owner_down` raises `PhloemError`) or call `recv(timeout)`.
    Credit is returned as you consume, so the producer never runs ahead of you by more
    than the window.
    """

    def __init__(self, source: StreamSource, name: str, event_type: Any = Any) -> None:
        self._source = source
        self.name = name
        self._type = event_type

    def recv(self, timeout: float | None = None) -> T:
        data = self._source.recv(timeout)
        result: T = decode_as(data, self._type)
        return result

    def __iter__(self) -> Iterator[T]:
        while True:
            try:
                yield self.recv()
            except PhloemError as err:
                if err.kind == ErrorKind.CLOSED:
                    return
                raise

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> EventStream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ClientBase:
    """Transport-independent client API. Errors raise `PhloemError` with a `kind`."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    @property
    def transport(self) -> Transport:
        return self._transport

    @overload
    def ask(self, actor: str, message: Any = None, *, timeout: float | None = None) -> Any: ...

    @overload
    def ask(
        self,
        actor: str,
        message: Any = None,
        *,
        timeout: float | None = None,
        reply_type: type[T],
    ) -> T: ...

    def ask(
        self,
        actor: str,
        message: Any = None,
        *,
        timeout: float | None = None,
        reply_type: Any = Any,
    ) -> Any:
        """Send `message` to the actor at path `actor` and return its reply.

        `timeout` (seconds) defaults to the daemon's `request_timeout_s`.
        """
        body = self._transport.request("ask", actor, _encode(message), timeout)
        return decode_as(body, reply_type)

    def tell(self, actor: str, message: Any = None) -> None:
        """Queue `message` for the actor; returns once it is in the actor's inbox."""
        self._transport.request("tell", actor, _encode(message), None)

    def status(self) -> DaemonStatus:
        """Uptime, counts of actors/processes/supervisors, restarts, memory, connections."""
        result: DaemonStatus = decode_as(
            self._transport.request("status", "", b"", None), DaemonStatus
        )
        return result

    def tree(self) -> TreeSnapshot:
        """The live supervision tree (`tree_snapshot()` of the daemon's root)."""
        result: TreeSnapshot = decode_as(
            self._transport.request("tree", "", b"", None), TreeSnapshot
        )
        return result

    def ping(self, timeout: float | None = None) -> None:
        self._transport.request("ping", "", b"", timeout)

    def subscribe(
        self, stream: str, window: CreditWindow | None = None, *, event_type: Any = Any
    ) -> EventStream[Any]:
        """Subscribe to a named stream under credit (`window`, default 64 msgs / 4 MiB)."""
        source = self._transport.subscribe(stream, window or CreditWindow())
        return EventStream(source, stream, event_type)

    def close(self) -> None:
        """Close the client; everything its owner held is cancelled."""
        self._transport.close()

    @property
    def closed(self) -> bool:
        return self._transport.closed

    def __enter__(self) -> ClientBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClientBase(abc.ABC):
    """What the asyncio feature mixins (`AsyncPlanningMethods`, `AsyncAgentMethods`)
    build on: `ask` and `subscribe`, which `phloem.client.aio.AsyncClient` implements
    over one connection."""

    @overload
    async def ask(
        self, actor: str, message: Any = None, *, timeout: float | None = None
    ) -> Any: ...

    @overload
    async def ask(
        self,
        actor: str,
        message: Any = None,
        *,
        timeout: float | None = None,
        reply_type: type[T],
    ) -> T: ...

    @abc.abstractmethod
    async def ask(
        self,
        actor: str,
        message: Any = None,
        *,
        timeout: float | None = None,
        reply_type: Any = Any,
    ) -> Any:
        """Send `message` to the actor at path `actor`; its reply, as `reply_type`."""

    @abc.abstractmethod
    async def subscribe(
        self, stream: str, window: CreditWindow | None = None, *, event_type: Any = Any
    ) -> AsyncEventStream[Any]:
        """Subscribe to a named stream under credit."""


def _encode(message: Any) -> bytes:
    try:
        return _encoder.encode(message)
    except (TypeError, msgspec.EncodeError) as exc:
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"message is not encodable: {exc}") from exc
