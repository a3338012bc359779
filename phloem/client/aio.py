"""`phloem.AsyncClient`: a native asyncio client for a phloem daemon's Unix socket.

One `AsyncClient` is one connection (`asyncio.open_unix_connection`) speaking the same
`ClientProtocol` as the blocking socket transport (`Hello` → `Welcome`, request ids,
credit). Requests are pipelined over it: each gets a request id and a future, and a
single reader task feeds what it reads to the protocol, which answers with the replies
(to their futures) and the streams that changed (to their readers). At most `max_inflight` asks and
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
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from phloem.client.agents import AsyncAgentMethods
from phloem.client.aiostream import AsyncEventStream
from phloem.client.base import (
    AsyncClientBase,
    _encode,
    decode_as,
    resolve_socket_path,
    trace_context,
)
from phloem.client.cluster import AsyncClusterMethods
from phloem.client.control import FOLLOW_WINDOW
from phloem.client.eval import AsyncEvalMethods
from phloem.client.live import AsyncLiveMethods
from phloem.client.mcp import AsyncMcpMethods
from phloem.client.planning import AsyncPlanningMethods
from phloem.client.plugins import AsyncPluginMethods
from phloem.client.protocol import (
    DEFAULT_CONNECT_TIMEOUT_S,
    RECV_BYTES,
    REPLY_GRACE_S,
    Answered,
    ClientProtocol,
    Failed,
    Outgoing,
    StreamChanged,
    Welcomed,
    connect_error,
)
from phloem.client.runs import AsyncRunsMethods
from phloem.client.sessions import AsyncSessionMethods
from phloem.client.socket import connect_unix
from phloem.client.telemetry import AsyncTelemetryMethods
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.logs import LogLine, LogsReply
from phloem.protocols.snapshot import TreeSnapshot
from phloem.protocols.wire import ChildControlled, DaemonStatus, Welcome

T = TypeVar("T")

# The daemon's default `daemon.max_inflight_per_connection` (phloem.config
# DEFAULT_MAX_INFLIGHT; a test keeps the two equal without importing the config here).
DEFAULT_MAX_INFLIGHT = 64
MAX_INFLIGHT_LIMIT = 10_000  # the top of the daemon's range for the setting


async def _open(path: Path, timeout: float) -> socket.socket:
    """A socket connected to `path`. A Unix socket connects at once or not at all: when
    the daemon's listen backlog is full (EAGAIN), the room is waited for as the blocking
    client waits, in a thread, within `timeout`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(str(path))
    except BlockingIOError:
        sock.close()
        return await asyncio.to_thread(connect_unix, path, timeout)
    except OSError as exc:
        sock.close()
        raise connect_error(path, exc) from exc
    return sock


class AsyncClient(
    AsyncAgentMethods,
    AsyncClusterMethods,
    AsyncEvalMethods,
    AsyncLiveMethods,
    AsyncMcpMethods,
    AsyncPlanningMethods,
    AsyncRunsMethods,
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
        self._proto = ClientProtocol(f"phloem-aio/{os.getpid()}")
        self._slots = asyncio.Semaphore(max_inflight)  # held until the daemon answers
        self._pending: dict[int, asyncio.Future[Answered]] = {}
        self._closed = False
        self._welcome: asyncio.Future[Welcome] = asyncio.get_running_loop().create_future()
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
        target = resolve_socket_path(path)
        sock = await _open(target, timeout)
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        except BaseException:
            sock.close()
            raise
        client = cls(reader, writer, target, max_inflight=max_inflight)
        try:
            client._write(client._proto.hello())
            try:
                async with asyncio.timeout(timeout):
                    welcome = await asyncio.shield(client._welcome)
            except TimeoutError:
                raise PhloemError(ErrorKind.TIMEOUT, f"no welcome from {target} in time") from None
        except BaseException:
            await client.aclose()
            raise
        if welcome.max_inflight is not None and welcome.max_inflight < client.max_inflight:
            # Never more outstanding than the daemon admits (nothing is in flight yet).
            client.max_inflight = welcome.max_inflight
            client._slots = asyncio.Semaphore(welcome.max_inflight)
        return client

    # -- connection ----------------------------------------------------------------------

    @property
    def welcome(self) -> Welcome | None:
        return self._proto.welcome

    @property
    def request_timeout_s(self) -> float:
        return self._proto.request_timeout_s

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def error(self) -> PhloemError | None:
        """The error that ended the connection (`connection_lost`, `closed`, ...), if one did."""
        return self._proto.error

    @property
    def inflight(self) -> int:
        """Asks and tells the daemon has not answered yet (at most `max_inflight`)."""
        return self._proto.inflight

    def _write(self, frame: bytes) -> None:
        self._proto.check()
        self._writer.write(frame)

    def _flush_queued(self) -> None:
        """Write what the protocol queued itself (credit, unsubscriptions)."""
        data = self._proto.data_to_send()
        if data and self._proto.error is None:
            self._writer.write(data)

    async def _read_loop(self) -> None:
        err: PhloemError
        try:
            while True:
                data = await self._reader.read(RECV_BYTES)
                if not data:
                    err = PhloemError(
                        ErrorKind.CONNECTION_LOST,
                        f"the daemon at {self.path} closed the connection",
                    )
                    break
                self._handle(self._proto.receive(data))
                if self._proto.error is not None:
                    return
                self._flush_queued()
        except OSError as exc:
            err = PhloemError(ErrorKind.CONNECTION_LOST, f"receive failed: {exc}")
        self._fail_all(err)

    def _handle(self, events: list[Any]) -> None:
        for event in events:
            kind = type(event)
            if kind is Answered:
                if event.counted:
                    self._slots.release()
                fut = self._pending.pop(event.rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(event)
            elif kind is StreamChanged:
                stream = event.stream
                assert isinstance(stream, AsyncEventStream)
                stream._wake()
            elif kind is Failed:
                self._failed(event)
            elif kind is Welcomed and not self._welcome.done():
                self._welcome.set_result(event.welcome)

    def _fail_all(self, err: PhloemError) -> None:
        """The connection is over: fail every pending request, end every stream."""
        self._failed(self._proto.fail(err))

    def _failed(self, failed: Failed) -> None:
        err = failed.error
        if not self._welcome.done():
            self._welcome.set_exception(err)
            self._welcome.exception()  # retrieved: `connect` re-raises it if it waits
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
        for stream in failed.streams:
            assert isinstance(stream, AsyncEventStream)
            stream._wake()
        for _ in range(failed.inflight):  # wake the callers waiting for a slot: they see the error
            self._slots.release()
        self._writer.close()

    async def _request(
        self, make: Callable[[], Outgoing], timeout: float | None = None, *, counted: bool = False
    ) -> bytes:
        """Send the request `make()` builds and wait for its reply body: the wait for a
        free slot (`counted`: an ask or tell needs one of the `max_inflight` slots, held
        until the daemon answers) and for the reply share the deadline of a request with
        the daemon-side `timeout`, which the request's own wait may shorten."""
        self._proto.check()
        out: Outgoing | None = None
        wait = self._proto.reply_wait(timeout)
        try:
            async with asyncio.timeout(wait) as scope:
                if counted:
                    await self._slots.acquire()
                try:
                    out = make()
                except BaseException:
                    if counted:
                        self._slots.release()
                    raise
                if out.wait_s < wait:
                    wait = out.wait_s
                    scope.reschedule(asyncio.get_running_loop().time() + wait)
                answer = await self._reply(out)
        except TimeoutError:
            if out is not None:
                raise PhloemError(
                    ErrorKind.TIMEOUT, f"no reply from the daemon within {wait} s"
                ) from None
            raise PhloemError(
                ErrorKind.TIMEOUT,
                f"no free request slot within {wait} s ({self.max_inflight} in flight)",
            ) from None
        return answer.body()

    async def _reply(self, out: Outgoing) -> Answered:
        fut: asyncio.Future[Answered] = asyncio.get_running_loop().create_future()
        self._pending[out.rid] = fut
        try:
            self._writer.write(out.frame)
            await self._writer.drain()
            return await fut
        except ConnectionError as exc:  # from drain
            raise self._proto.error or PhloemError(
                ErrorKind.CONNECTION_LOST, f"send failed: {exc}"
            ) from exc
        finally:
            if self._pending.pop(out.rid, None) is not None:
                self._proto.forget(out.rid)

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
        body = _encode(message)
        trace = trace_context()
        reply = await self._request(
            lambda: self._proto.ask(actor, body, timeout, trace), timeout, counted=True
        )
        return decode_as(reply, reply_type)

    async def tell(self, actor: str, message: Any = None) -> None:
        """Queue `message` for the actor; returns once it is in the actor's inbox."""
        body = _encode(message)
        trace = trace_context()
        await self._request(lambda: self._proto.tell(actor, body, trace), counted=True)

    async def status(self) -> DaemonStatus:
        """Uptime, counts of actors/processes/supervisors, restarts, memory, connections."""
        result: DaemonStatus = decode_as(
            await self._request(lambda: self._proto.control("status")), DaemonStatus
        )
        return result

    async def tree(self) -> TreeSnapshot:
        """The live supervision tree (`tree_snapshot()` of the daemon's root)."""
        result: TreeSnapshot = decode_as(
            await self._request(lambda: self._proto.control("tree")), TreeSnapshot
        )
        return result

    async def ping(self, timeout: float | None = None) -> None:
        await self._request(lambda: self._proto.control("ping", timeout), timeout)

    async def stop_daemon(self) -> None:
        """Ask the daemon to stop gracefully (it replies first, then stops)."""
        await self._request(lambda: self._proto.control("stop"))

    async def _control(self, action: str, path: str, timeout: float | None) -> ChildControlled:
        reply = await self._request(
            lambda: self._proto.control_child(action, path, timeout), timeout, counted=True
        )
        result: ChildControlled = decode_as(reply, ChildControlled)
        return result

    async def start_child(self, path: str, *, timeout: float | None = None) -> ChildControlled:
        """Start the stopped child at tree path `path` (as `Client.start_child`)."""
        return await self._control("start", path, timeout)

    async def stop_child(self, path: str, *, timeout: float | None = None) -> ChildControlled:
        """Stop the child at `path`; a kept child stays stopped until started."""
        return await self._control("stop", path, timeout)

    async def restart_child(self, path: str, *, timeout: float | None = None) -> ChildControlled:
        """Stop the child at `path` if it runs, then start it again."""
        return await self._control("restart", path, timeout)

    async def logs(self, path: str = "", since: float | None = None) -> LogsReply:
        """The daemon's kept log lines of `path` and below it (as `Client.logs`)."""
        reply = await self._request(lambda: self._proto.logs(path, since, False))
        result: LogsReply = decode_as(reply, LogsReply)
        return result

    async def follow_logs(
        self, path: str = "", since: float | None = None
    ) -> tuple[LogsReply, AsyncEventStream[LogLine]]:
        """The kept lines and a stream of every later line of `path`."""
        reply = decode_as(
            await self._request(lambda: self._proto.logs(path, since, True)), LogsReply
        )
        assert reply.stream is not None
        stream = await self.subscribe(reply.stream, FOLLOW_WINDOW, event_type=LogLine)
        return reply, stream

    async def subscribe(
        self, stream: str, window: CreditWindow | None = None, *, event_type: Any = Any
    ) -> AsyncEventStream[Any]:
        """Subscribe to a named stream under credit (`window`, default 64 msgs / 4 MiB)."""
        remote: AsyncEventStream[Any] = AsyncEventStream(
            self, stream, window or CreditWindow(), event_type
        )
        try:
            await self._request(lambda: self._proto.subscribe(remote))
        except BaseException:
            self._proto.abandon(remote)  # subscribed or not: nobody will read it
            self._flush_queued()
            raise
        return remote

    async def aclose(self) -> None:
        """Close the connection; everything its owner held is cancelled by the daemon.
        Pending requests fail and streams end with `closed`."""
        if self._closed:
            return
        self._closed = True
        self._fail_all(PhloemError(ErrorKind.CLOSED, "the client is closed"))
        self._reader_task.cancel()
        await asyncio.wait([self._reader_task])
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(REPLY_GRACE_S):
                await self._writer.wait_closed()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
