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
import inspect
import itertools
import os
import re
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import msgspec

from phloem.actors.agents.events import Event as AgentEvent
from phloem.actors.agents.protocol import (
    AgentInfo,
    AgentPlan,
    AgentRunEnd,
    AgentRunEvent,
    AgentRunStarted,
    AgentStreamItem,
    CancelAgentRun,
    ListAgents,
    PlanAgent,
    StartAgentRun,
)
from phloem.actors.agents.runner import AgentRun
from phloem.actors.planning.events import (
    DEFAULT_EVENT_WINDOW_BYTES,
    DEFAULT_EVENT_WINDOW_MESSAGES,
    PlanningEvent,
)
from phloem.client import agents as _agents, planning as _planning
from phloem.client.base import _encode, decode_as
from phloem.client.socket import (
    DEFAULT_CONNECT_TIMEOUT_S,
    RECV_BYTES,
    REPLY_GRACE_S,
    no_daemon_error,
)
from phloem.protocols.errors import PhloemError
from phloem.protocols.plan import (
    AwaitPlanning,
    CancelPlanning,
    OpenPlanningEvents,
    PlanningCancelled,
    PlanningResult,
    PlanningStarted,
    StartPlanning,
    decode_result,
)
from phloem.protocols.wire import (
    DEFAULT_MAX_FRAME_BYTES,
    HEADER_BYTES,
    PROTOCOL_VERSION,
    Ask,
    Credit,
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
from phloem.supervision.credit import CreditWindow
from phloem.supervision.snapshot import TreeSnapshot

T = TypeVar("T")

# The daemon's default `daemon.max_inflight_per_connection` (phloem.config
# DEFAULT_MAX_INFLIGHT; a test keeps the two equal without importing the config here).
DEFAULT_MAX_INFLIGHT = 64
MAX_INFLIGHT_LIMIT = 10_000  # the top of the daemon's range for the setting
# The daemon refuses an ask or tell over its in-flight limit with this `backpressure`
# message (phloem/daemon/connection.py `_admit`) before running it. It counts a request
# done only just after writing its reply, so a request sent the moment a reply arrives
# can be refused although the client stayed within the limit; such a refusal is retried
# after a pause that doubles from the first to the second of these (seconds).
_ADMISSION_REFUSED = re.compile(r"\d+ requests in flight")
ADMISSION_RETRY_S = (0.001, 0.05)


def _refused_at_admission(result: Reply | Fail) -> bool:
    return (
        type(result) is Fail
        and result.error.kind == "backpressure"
        and _ADMISSION_REFUSED.fullmatch(result.error.message) is not None
    )


def _resolve_path(path: str | os.PathLike[str] | None) -> Path:
    """`path`, else `$PHLOEM_SOCKET`, else the default config's socket (as `Client.connect`)."""
    if path is not None:
        return Path(path)
    env = os.environ.get("PHLOEM_SOCKET")
    if env:
        return Path(env)
    from phloem.config import default_socket_path

    return default_socket_path()


def _check_max_inflight(value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("max_inflight must be an int")
    if not 1 <= value <= MAX_INFLIGHT_LIMIT:
        raise ValueError(f"max_inflight must be between 1 and {MAX_INFLIGHT_LIMIT}")


class AsyncEventStream(Generic[T]):
    """Events of a subscription, decoded into `event_type`: `async for event in stream`.

    Iteration ends when the stream ends normally (or the client is closed); an abnormal
    end (`backpressure`, `owner_down`, `connection_lost`, ...) raises `PhloemError`.
    Credit goes back to the daemon as you read (in batches of half the window), so the
    daemon never runs ahead of you by more than the window.
    """

    def __init__(
        self, client: AsyncClient, name: str, window: CreditWindow, event_type: Any = Any
    ) -> None:
        self._client = client
        self.name = name
        self.window = window
        self._type = event_type
        self.sub: int | None = None
        self._buffer: deque[bytes] = deque()
        self._end: PhloemError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._abandoned = False  # the subscribing coroutine gave up before the reply
        self._unacked_msgs = 0
        self._unacked_bytes = 0
        self._batch_msgs = max(1, window.messages // 2)
        self._batch_bytes = max(1, window.bytes // 2)

    # -- fed by the client's reader task -------------------------------------------------

    def _push(self, data: bytes) -> bool:
        """Buffer one event; False if the daemon sent beyond the granted credit."""
        self._buffer.append(data)
        self._wake()
        return len(self._buffer) <= self.window.messages

    def _finish(self, err: PhloemError) -> None:
        if self._end is None:
            self._end = err
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- consumer ------------------------------------------------------------------------

    async def recv(self, timeout: float | None = None) -> T:
        """The next event. Waits up to `timeout` seconds (None: until an event arrives,
        the stream ends or the connection drops); `PhloemError` `timeout`, `closed` (ended
        normally) or the end's kind."""
        if not self._buffer and self._end is None:
            self._flush()
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await waiter
            except TimeoutError:
                raise PhloemError("timeout", f"no event within {timeout} s") from None
            finally:
                self._waiter = None
        if not self._buffer:
            assert self._end is not None
            raise self._end
        item = self._buffer.popleft()
        self._unacked_msgs += 1
        self._unacked_bytes += len(item)
        if self._unacked_msgs >= self._batch_msgs or self._unacked_bytes >= self._batch_bytes:
            self._flush()
        result: T = decode_as(item, self._type)
        return result

    def _flush(self) -> None:
        if self._unacked_msgs and self.sub is not None and self._end is None:
            msgs, nbytes = self._unacked_msgs, self._unacked_bytes
            self._unacked_msgs = self._unacked_bytes = 0
            self._client._write(encode_frame(Credit(self.sub, msgs, nbytes)))

    def __aiter__(self) -> AsyncEventStream[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.recv()
        except PhloemError as err:
            if err.kind == "closed":
                raise StopAsyncIteration from None
            raise

    async def aclose(self) -> None:
        """Unsubscribe (waits at most `REPLY_GRACE_S` for the daemon's answer); events
        still buffered are dropped and `recv` raises `closed` from now on."""
        sub, client = self.sub, self._client
        self._buffer.clear()
        if sub is None or self._end is not None or client.closed:
            self._finish(PhloemError("closed", f"stream {self.name!r} closed"))
            return
        with contextlib.suppress(PhloemError):
            await client._request(lambda rid: Unsubscribe(rid, sub), REPLY_GRACE_S)
        client._subs.pop(sub, None)
        self._buffer.clear()  # what arrived while unsubscribing
        self._finish(PhloemError("closed", f"stream {self.name!r} unsubscribed"))

    async def __aenter__(self) -> AsyncEventStream[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncClient:
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
        _check_max_inflight(max_inflight)
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
        _check_max_inflight(max_inflight)
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
        backoff = ADMISSION_RETRY_S[0]
        try:
            async with asyncio.timeout(wait):
                while True:
                    if counted:
                        await self._slots.acquire()
                    rid = self._send(make, counted)
                    sent = True
                    result = await self._reply(rid)
                    if counted and _refused_at_admission(result):
                        # Not run: the daemon's count was one reply behind ours. Again.
                        await asyncio.sleep(backoff)
                        backoff = min(backoff * 2, ADMISSION_RETRY_S[1])
                        continue
                    break
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
        reply = await self._request(
            lambda rid: Ask(rid, actor, body, timeout), self._wait(timeout), counted=True
        )
        return decode_as(reply, reply_type)

    async def tell(self, actor: str, message: Any = None) -> None:
        """Queue `message` for the actor; returns once it is in the actor's inbox."""
        body = msgspec.Raw(_encode(message))
        await self._request(lambda rid: Tell(rid, actor, body), self._wait(None), counted=True)

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

    # -- planning (see phloem.client.planning: same requests, replies and errors) --------

    async def _planning_ask(
        self, message: Any, reply_type: Any, timeout: float | None = None
    ) -> Any:
        try:
            return await self.ask(
                _planning.PLANNING_SERVICE, message, reply_type=reply_type, timeout=timeout
            )
        except PhloemError as err:
            if err.kind == "unknown_actor":
                raise PhloemError(
                    "planning_unavailable",
                    "the daemon runs no planning service: configure [planning.planners] "
                    "and [planning.executors]",
                ) from None
            raise

    async def start_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: _planning.Options = None,
        *,
        events: AsyncEventStream[Any] | None = None,
    ) -> str:
        """Start a run; its opaque, owner-bound ref (see `Client.start_planning`)."""
        request = StartPlanning(
            planner=planner,
            executor=executor,
            goal=goal,
            context=context,
            options=_planning._options(options),
            events=events.name if events is not None else None,
        )
        started: PlanningStarted = await self._planning_ask(request, PlanningStarted)
        return started.ref

    async def open_planning_events(
        self, window: CreditWindow | None = None
    ) -> AsyncEventStream[PlanningEvent]:
        """A stream for the next `start_planning(events=...)`; ends after `terminal`."""
        name = await self._planning_ask(OpenPlanningEvents(), str)
        window = window or CreditWindow(DEFAULT_EVENT_WINDOW_MESSAGES, DEFAULT_EVENT_WINDOW_BYTES)
        return await self.subscribe(name, window, event_type=PlanningEvent)

    async def await_planning(self, ref: str, timeout: float | None = None) -> PlanningResult:
        """The run's result; `planning_await_timeout` if it is still running after
        `timeout` seconds (None: wait until it ends, in slices of `AWAIT_SLICE_S`)."""
        if timeout is not None:
            return await self._await_once(ref, timeout)
        while True:
            try:
                return await self._await_once(ref, _planning.AWAIT_SLICE_S)
            except PhloemError as err:
                if err.kind != "planning_await_timeout":
                    raise

    async def _await_once(self, ref: str, timeout: float) -> PlanningResult:
        text = await self._planning_ask(
            AwaitPlanning(ref=ref, timeout_s=timeout), str, timeout + _planning.REQUEST_SLACK_S
        )
        return decode_result(text)

    async def cancel_planning(self, ref: str, reason: Any = "user_cancelled") -> bool:
        """Cancel the run (its active worker is killed); False if it had already ended."""
        reply: PlanningCancelled = await self._planning_ask(
            CancelPlanning(ref=ref, reason=reason), PlanningCancelled
        )
        return reply.cancelled

    async def run_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: _planning.Options = None,
        *,
        on_event: Callable[[PlanningEvent], Awaitable[None] | None] | None = None,
    ) -> PlanningResult:
        """Start a run and wait for its result; `on_event(event)` (a function or a
        coroutine function) sees its progress."""
        if on_event is None:
            ref = await self.start_planning(planner, executor, goal, context, options)
            return await self.await_planning(ref)
        stream = await self.open_planning_events()

        async def pump() -> None:
            async for event in stream:
                outcome = on_event(event)
                if inspect.isawaitable(outcome):
                    await outcome

        reader = asyncio.create_task(pump(), name="planning-events")
        try:
            ref = await self.start_planning(
                planner, executor, goal, context, options, events=stream
            )
            result = await self.await_planning(ref)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), _planning.REQUEST_SLACK_S)
        finally:
            if not reader.done():
                reader.cancel()
            await asyncio.wait([reader])
            await stream.aclose()
        failure = None if reader.cancelled() else reader.exception()
        if failure is not None and not isinstance(failure, PhloemError):
            raise failure
        return result

    # -- agents (see phloem.client.agents) ----------------------------------------------

    async def list_agents(self, *, timeout: float | None = None) -> list[AgentInfo]:
        result: list[AgentInfo] = await self.ask(
            _agents.SERVICE, ListAgents(), timeout=timeout, reply_type=list[AgentInfo]
        )
        return result

    async def plan_agent(
        self, name: str, state: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> list[list[str]]:
        """The groups `name` would run first given `state` (GOAP and fixed planners)."""
        plan = await self.ask(
            _agents.SERVICE,
            PlanAgent(name, dict(state or {})),
            timeout=timeout,
            reply_type=AgentPlan,
        )
        return plan.groups

    async def start_agent_run(
        self,
        name: str,
        *,
        input: str | None = None,
        state: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AgentRunStarted:
        """Start a run; follow `stream` with `subscribe` and cancel it with its `ref`."""
        started: AgentRunStarted = await self.ask(
            _agents.SERVICE,
            StartAgentRun(name, input, dict(state or {})),
            timeout=timeout,
            reply_type=AgentRunStarted,
        )
        return started

    async def cancel_agent_run(self, ref: str, *, timeout: float | None = None) -> None:
        await self.ask(_agents.SERVICE, CancelAgentRun(ref), timeout=timeout)

    async def run_agent(
        self,
        name: str,
        *,
        input: str | None = None,
        state: Mapping[str, Any] | None = None,
        on_event: Callable[[AgentEvent], Awaitable[None] | None] | None = None,
        window: CreditWindow | None = None,
        timeout: float = _agents.DEFAULT_RUN_TIMEOUT_S,
    ) -> AgentRun:
        """Run agent `name` to its end; `on_event` (a function or a coroutine function)
        sees each event as it arrives; `timeout` bounds the wait for each stream item."""
        if not isinstance(name, str):
            raise TypeError("name must be a str (register Agent objects on an embedded tree)")
        started = await self.start_agent_run(name, input=input, state=state)
        stream = await self.subscribe(
            started.stream, window or _agents.DEFAULT_EVENT_WINDOW, event_type=AgentStreamItem
        )
        events: list[AgentEvent] = []
        async with stream:
            while True:
                try:
                    item = await stream.recv(timeout)
                except PhloemError as err:
                    if err.kind != "closed":
                        raise
                    raise PhloemError(
                        "run_incomplete",
                        f"the event stream of run {started.ref} ended without its result",
                    ) from None
                if isinstance(item, AgentRunEvent):
                    events.append(item.event)
                    if on_event is not None:
                        outcome = on_event(item.event)
                        if inspect.isawaitable(outcome):
                            await outcome
                elif isinstance(item, AgentRunEnd):
                    return msgspec.structs.replace(item.run, events=tuple(events))
