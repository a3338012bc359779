"""`phloem.AsyncClient`: a native asyncio client for a phloem daemon's Unix socket.

One `AsyncClient` is one connection (`asyncio.open_unix_connection`) with the handshake of
the blocking socket transport (`Hello` → `Welcome`). Requests are pipelined over it: each
gets a request id and a future, and a single reader task dispatches every `Reply`/`Fail`
to its future and every `Event`/`StreamEnd` to its stream. At most `max_inflight` asks and
tells are outstanding at once (the daemon's `daemon.max_inflight_per_connection`, default
`DEFAULT_MAX_INFLIGHT`); more callers wait for a free slot instead of being refused with
`backpressure`. A slot is held until the daemon has answered, even when the caller has
stopped waiting (timeout or cancellation), so the count always matches the daemon's.

Every request wait has a deadline (the daemon's `request_timeout_s`, or the call's own
`timeout`, plus `REPLY_GRACE_S`). A lost connection fails every pending request with
`connection_lost` and ends every stream; cancelling one awaiting coroutine leaves the
connection to the others (its late reply is dropped).

`AsyncClient` is socket-only: an embedded `phloem.Tree` has no socket; use its blocking
`tree.client()` (from asyncio: `await asyncio.to_thread(client.ask, ...)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from phloem.client.agents import AsyncAgentMethods
from phloem.client.aiostream import AsyncEventStream
from phloem.client.base import AsyncClientBase, _encode, decode_as, trace_context
from phloem.client.cluster import AsyncClusterMethods
from phloem.client.eval import AsyncEvalMethods
from phloem.client.live import AsyncLiveMethods
from phloem.client.mcp import AsyncMcpMethods
from phloem.client.planning import AsyncPlanningMethods
from phloem.client.plugins import AsyncPluginMethods
from phloem.client.sessions import AsyncSessionMethods
from phloem.client.socket import (
    DEFAULT_CONNECT_TIMEOUT_S,
    RECV_BYTES,
    REPLY_GRACE_S,
    no_daemon_error,
)
from phloem.client.telemetry import AsyncTelemetryMethods
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.snapshot import TreeSnapshot
from phloem.protocols.wire import (
    DEFAULT_MAX_FRAME_BYTES,
    HEADER_BYTES,
    PROTOCOL_VERSION,
    Ask,
    DaemonStatus,
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

T = TypeVar("T")

# The daemon's default `daemon.max_inflight_per_connection` (phloem.config
# DEFAULT_MAX_INFLIGHT; a test keeps the two equal without importing the config here).
DEFAULT_MAX_INFLIGHT = 64
MAX_INFLIGHT_LIMIT = 10_000  # the top of the daemon's range for the setting


def _resolve_path(path: str | os.PathLike[str] | None) -> Path:
    """`path`, else `$PHLOEM_SOCKET`, else the default config's socket (as `Client.connect`)."""
    if path is not None:
        return Path(path)
    env = os.environ.get("PHLOEM_SOCKET")
    if env:
        return Path(env)
    from phloem.base.paths import default_socket_path

    return default_socket_path()


class AsyncClient(
    AsyncAgentMethods,
    AsyncClusterMethods,
    AsyncEvalMethods,
    AsyncLiveMethods,
    AsyncMcpMethods,
    AsyncPlanningMethods,
    AsyncSessionMethods,
    AsyncPluginMethods,
    AsyncTelemetryMethods,
    AsyncClientBase,
):
    """A native asyncio client over one pipelined connection to a phloem daemon.

        async with await phloem.AsyncClient.connect() as client:
            replies = await asyncio.gather(*(client.ask("echo", i) for i in range(200)))

    The same API as `phloem.Client`, as coroutines: `ask`, `tell`, `status`, `tree`,
    `ping`, `subscribe` (an `AsyncEventStream`), `stop_daemon`, `aclose` and the feature
    methods (planning, agents). Errors raise `PhloemError` with the blocking client's
    kinds. Socket-only: for an embedded `phloem.Tree` use `tree.client()`.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | None = None,
        path: Path | None = None,
        *,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        """Use `await AsyncClient.connect(...)`; this wraps an opened, unshaken stream pair."""
        if not isinstance(reader, asyncio.StreamReader) or writer is None:
            raise TypeError(
                "AsyncClient is socket-only: use `await AsyncClient.connect(path)` "
                "(for an embedded Tree, call its blocking `tree.client()` via asyncio.to_thread)"
            )
        if path is None:
            path = Path(writer.get_extra_info("peername") or "?")
        check_range("max_inflight", max_inflight, 1, MAX_INFLIGHT_LIMIT)
        self.path = path
        self.max_inflight = max_inflight
        self._reader = reader
        self._writer = writer
        self._frames = FrameReader(DEFAULT_MAX_FRAME_BYTES)
        self._max_frame_bytes = DEFAULT_MAX_FRAME_BYTES
        self._ids = itertools.count(1)
        self._slots = asyncio.Semaphore(max_inflight)
        self._slot_ids: set[int] = set()  # asks/tells holding a slot until the daemon answers
        self._pending: dict[int, asyncio.Future[Reply | Fail]] = {}
        self._pending_subs: dict[int, AsyncEventStream[Any]] = {}
        self._subs: dict[int, AsyncEventStream[Any]] = {}
        self._error: PhloemError | None = None
        self._closed = False
        self._welcome: asyncio.Future[Welcome] = asyncio.get_running_loop().create_future()
        self.request_timeout_s = 30.0
        self._reader_task = asyncio.create_task(self._read_loop(), name=f"phloem-aio {path}")

    @classmethod
    async def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        *,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> AsyncClient:
        """Connect to the daemon at `path` (default: `$PHLOEM_SOCKET`, else the default
        config's socket path) and shake hands, within `timeout` seconds.

        `max_inflight` bounds the asks and tells outstanding at once: keep it at most the
        daemon's `daemon.max_inflight_per_connection`."""
        check_range("max_inflight", max_inflight, 1, MAX_INFLIGHT_LIMIT)
        target = _resolve_path(path)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(str(target))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            raise no_daemon_error(target) from exc
        except PermissionError as exc:
            raise PhloemError("permission_denied", f"cannot connect to {target}: {exc}") from exc
        except TimeoutError as exc:
            raise PhloemError("timeout", f"connecting to {target} timed out") from exc
        except OSError as exc:
            raise PhloemError("connection_lost", f"cannot connect to {target}: {exc}") from exc
        client = cls(reader, writer, target, max_inflight=max_inflight)
        try:
            client._write(
                encode_frame(Hello(version=PROTOCOL_VERSION, client=f"phloem-aio/{os.getpid()}"))
            )
            try:
                async with asyncio.timeout(timeout):
                    welcome = await asyncio.shield(client._welcome)
            except TimeoutError:
                raise PhloemError("timeout", f"no welcome from {target} in time") from None
        except BaseException:
            await client.aclose()
            raise
        client._max_frame_bytes = welcome.max_frame_bytes
        client._frames.max_frame_bytes = max(welcome.max_frame_bytes, 1024)
        client.request_timeout_s = welcome.request_timeout_s
        if welcome.max_inflight is not None and welcome.max_inflight < client.max_inflight:
            # Never more outstanding than the daemon admits (nothing is in flight yet).
            client.max_inflight = welcome.max_inflight
            client._slots = asyncio.Semaphore(welcome.max_inflight)
        return client

    # -- connection ----------------------------------------------------------------------

    @property
    def welcome(self) -> Welcome | None:
        w = self._welcome
        return w.result() if w.done() and not w.cancelled() and not w.exception() else None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def inflight(self) -> int:
        """Asks and tells the daemon has not answered yet (at most `max_inflight`)."""
        return len(self._slot_ids)

    def _write(self, frame: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._writer.write(frame)

    async def _read_loop(self) -> None:
        err: PhloemError
        try:
            while True:
                data = await self._reader.read(RECV_BYTES)
                if not data:
                    err = PhloemError(
                        "connection_lost", f"the daemon at {self.path} closed the connection"
                    )
                    break
                for frame in self._frames.feed(data):
                    self._dispatch(frame)
                if self._error is not None:
                    return
        except PhloemError as exc:  # a frame over max_frame_bytes
            err = exc
        except OSError as exc:
            err = PhloemError("connection_lost", f"receive failed: {exc}")
        self._fail_all(err)

    def _dispatch(self, frame: bytes) -> None:
        try:
            message = decode_server(frame)
        except PhloemError as err:
            self._fail_all(err)
            return
        kind = type(message)
        if kind is Reply or kind is Fail:
            rid = message.id
            if rid is None:  # an error for the whole connection; the daemon closes it
                self._fail_all(PhloemError.from_value(message.error))
                return
            if rid in self._slot_ids:
                self._slot_ids.discard(rid)
                self._slots.release()
            stream = self._pending_subs.pop(rid, None)
            if stream is not None and kind is Reply:
                stream.sub = sub = msgspec.msgpack.decode(message.body, type=int)
                self._subs[sub] = stream
                if stream._abandoned:  # nobody will read it: end it on the daemon too
                    self._subs.pop(sub, None)
                    with contextlib.suppress(PhloemError):
                        self._write(encode_frame(Unsubscribe(next(self._ids), sub)))
            fut = self._pending.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(message)
        elif kind is Event:
            stream = self._subs.get(message.sub)
            if stream is not None and not stream._push(bytes(message.body)):
                self._fail_all(
                    PhloemError("bad_frame", "the daemon sent beyond the granted credit")
                )
        elif kind is StreamEnd:
            stream = self._subs.pop(message.sub, None)
            if stream is not None:
                name = stream.name
                if message.kind == "normal":
                    stream._finish(PhloemError("closed", f"stream {name!r} ended"))
                else:
                    detail = message.detail or message.kind
                    stream._finish(PhloemError(message.kind, f"stream {name!r} ended: {detail}"))
        elif kind is Welcome and not self._welcome.done():
            self._welcome.set_result(message)

    def _fail_all(self, err: PhloemError) -> None:
        """The connection is over: fail every pending request, end every stream."""
        if self._error is None:
            self._error = err
        err = self._error
        if not self._welcome.done():
            self._welcome.set_exception(err)
            self._welcome.exception()  # retrieved: `connect` re-raises it if it waits
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
        streams = [*self._subs.values(), *self._pending_subs.values()]
        self._subs.clear()
        self._pending_subs.clear()
        for stream in streams:
            stream._finish(err)
        for _ in self._slot_ids:  # wake the callers waiting for a slot: they see the error
            self._slots.release()
        self._slot_ids.clear()
        self._writer.close()

    async def _request(
        self, make: Callable[[int], Any], wait: float, *, counted: bool = False
    ) -> bytes:
        """Send `make(rid)` and wait up to `wait` s for its reply body. `counted`: an ask
        or tell, which needs one of the `max_inflight` slots (held until the reply)."""
        if self._error is not None:
            raise self._error
        sent = False
        try:
            async with asyncio.timeout(wait):
                if counted:
                    await self._slots.acquire()
                rid = self._send(make, counted)
                sent = True
                result = await self._reply(rid)
        except TimeoutError:
            if sent:
                raise PhloemError("timeout", f"no reply from the daemon within {wait} s") from None
            raise PhloemError(
                "timeout", f"no free request slot within {wait} s ({self.max_inflight} in flight)"
            ) from None
        if isinstance(result, Fail):
            raise PhloemError.from_value(result.error)
        return bytes(result.body)

    def _send(self, make: Callable[[int], Any], counted: bool) -> int:
        """Write the request (its slot, if `counted`, already acquired); its id."""
        try:
            if self._error is not None:
                raise self._error
            rid = next(self._ids)
            frame = encode_frame(make(rid))
            if len(frame) - HEADER_BYTES > self._max_frame_bytes:
                raise PhloemError(
                    "frame_too_large",
                    f"request of {len(frame)} bytes exceeds the daemon's "
                    f"max_frame_bytes {self._max_frame_bytes}",
                )
            self._writer.write(frame)
        except BaseException:
            if counted:
                self._slots.release()
            raise
        self._pending[rid] = asyncio.get_running_loop().create_future()
        if counted:
            self._slot_ids.add(rid)  # released by the reader when the answer comes
        return rid

    async def _reply(self, rid: int) -> Reply | Fail:
        fut = self._pending[rid]
        try:
            await self._writer.drain()
            return await fut
        except ConnectionError as exc:  # from drain
            raise self._error or PhloemError("connection_lost", f"send failed: {exc}") from exc
        finally:
            self._pending.pop(rid, None)

    def _wait(self, timeout: float | None) -> float:
        return (timeout if timeout is not None else self.request_timeout_s) + REPLY_GRACE_S

    # -- the client API ------------------------------------------------------------------

    async def ask(
        self,
        actor: str,
        message: Any = None,
        *,
        timeout: float | None = None,
        reply_type: Any = Any,
    ) -> Any:
        """Send `message` to the actor at path `actor` and return its reply.

        `timeout` (seconds) defaults to the daemon's `request_timeout_s`; it also covers
        waiting for a free in-flight slot."""
        body = msgspec.Raw(_encode(message))
        trace = trace_context()
        reply = await self._request(
            lambda rid: Ask(rid, actor, body, timeout, trace), self._wait(timeout), counted=True
        )
        return decode_as(reply, reply_type)

    async def tell(self, actor: str, message: Any = None) -> None:
        """Queue `message` for the actor; returns once it is in the actor's inbox."""
        body = msgspec.Raw(_encode(message))
        trace = trace_context()
        await self._request(
            lambda rid: Tell(rid, actor, body, trace), self._wait(None), counted=True
        )

    async def status(self) -> DaemonStatus:
        """Uptime, counts of actors/processes/supervisors, restarts, memory, connections."""
        result: DaemonStatus = decode_as(
            await self._request(GetStatus, self._wait(None)), DaemonStatus
        )
        return result

    async def tree(self) -> TreeSnapshot:
        """The live supervision tree (`tree_snapshot()` of the daemon's root)."""
        result: TreeSnapshot = decode_as(
            await self._request(GetTree, self._wait(None)), TreeSnapshot
        )
        return result

    async def ping(self, timeout: float | None = None) -> None:
        await self._request(Ping, self._wait(timeout))

    async def stop_daemon(self) -> None:
        """Ask the daemon to stop gracefully (it replies first, then stops)."""
        await self._request(StopDaemon, self._wait(None))

    async def subscribe(
        self, stream: str, window: CreditWindow | None = None, *, event_type: Any = Any
    ) -> AsyncEventStream[Any]:
        """Subscribe to a named stream under credit (`window`, default 64 msgs / 4 MiB)."""
        window = window or CreditWindow()
        remote: AsyncEventStream[Any] = AsyncEventStream(self, stream, window, event_type)

        def make(rid: int) -> Subscribe:
            self._pending_subs[rid] = remote
            return Subscribe(rid, stream, window.messages, window.bytes)

        try:
            await self._request(make, self._wait(None))
        except BaseException:
            if remote.sub is not None and remote._end is None:  # subscribed, caller gone
                self._subs.pop(remote.sub, None)
                with contextlib.suppress(PhloemError):
                    self._write(encode_frame(Unsubscribe(next(self._ids), remote.sub)))
            remote._abandoned = True
            raise
        return remote

    async def aclose(self) -> None:
        """Close the connection; everything its owner held is cancelled by the daemon.
        Pending requests fail and streams end with `closed`."""
        if self._closed:
            return
        self._closed = True
        self._fail_all(PhloemError("closed", "the client is closed"))
        self._reader_task.cancel()
        await asyncio.wait([self._reader_task])
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(REPLY_GRACE_S):
                await self._writer.wait_closed()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
