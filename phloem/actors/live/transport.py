"""The sockets of Live sessions: one shared asyncio loop, one `Link` per connection.

The session's state machine is its actor (`session.LiveSession`); everything here only
moves frames. `LiveLoop` runs one asyncio event loop on one daemon thread for every
session's WebSocket. A `Link` is one connection attempt of one session: it dials (the
key in the `x-goog-api-key` header, never in the URL), sends the setup frame, waits for
`setupComplete`, then reads server frames — decoded and checked by
`phloem.protocols.live` — and writes what the session queued in its `Outbox`. It reports
to the session actor with `Link*` messages tagged with its link id, so that a message
from a link the session already left behind is recognisable and ignored. The session is
a light actor: when it is idle, a frame is handled right on the loop thread
(`ActorHandle.tell_here`), and what that writes to client connections is held until the
loop's next turn (`LiveLoop.hold_writes`), so the events of every frame one read brought
leave in one write.

Whatever ends a link is reported: a link whose task (reader or writer) fails with an
exception nothing here expected logs one line (`live_link_failed`), closes its socket
(code 1011) and tells its session `LinkDown(reason="internal_error")`.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import SpanKind
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from phloem.base import telemetry, writebatch
from phloem.base.logs import get_logger
from phloem.protocols import live as wire
from phloem.protocols.errors import PhloemError
from phloem.protocols.secrets import redact

log = get_logger("phloem.live")

# How long `Link.run` waits after a full actor inbox before offering a frame again.
POST_RETRY_S = 0.005
LOOP_START_TIMEOUT_S = 10.0
LOOP_STOP_TIMEOUT_S = 5.0
CLOSE_TIMEOUT_S = 2.0
# The close code websockets sends when a frame exceeds `max_size`.
MESSAGE_TOO_BIG = 1009
# The close code a link sends when one of its tasks failed.
INTERNAL_ERROR = 1011
# What one read of a Live socket asks for (`_small_reads`): below malloc's mmap threshold.
READ_BYTES = 64 * 1024


class LiveLoop:
    """One asyncio loop on one daemon thread, shared by every session's sockets."""

    def __init__(self, name: str = "phloem-live-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait(LOOP_START_TIMEOUT_S)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            writebatch.release()  # a batch never outlives the loop

    def hold_writes(self) -> None:
        """On the loop thread: hold what it writes to client connections until the loop's
        next turn (`writebatch`), when every frame that one read brought is handled."""
        if writebatch.hold():
            self.loop.call_soon(writebatch.release)

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the loop thread (dropped when the loop has stopped)."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # the loop is closed: the session is being torn down anyway

    def stop(self) -> None:
        async def cancel_all() -> None:
            tasks = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
            if tasks:  # clean closes under way get a moment to finish
                _, tasks = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S / 2)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_closed():
            return
        try:
            self.submit(cancel_all()).result(LOOP_STOP_TIMEOUT_S)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(LOOP_STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()


class Outbox:
    """A session's queued client frames, bounded in messages and bytes (thread-safe).

    Input waits at the back; tool responses and control frames jump to the front. The
    link's writer takes frames from the front on the loop thread.
    """

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._frames: collections.deque[bytes] = collections.deque()
        self._bytes = 0
        self.wake: Callable[[], None] = lambda: None

    def admit(self, frames: list[bytes], *, urgent: bool = False) -> bool:
        """Queue all of `frames` or none (False: it would overflow)."""
        size = sum(len(f) for f in frames)
        with self._lock:
            if not urgent and (
                len(self._frames) + len(frames) > self.max_messages
                or self._bytes + size > self.max_bytes
            ):
                return False
            if urgent:
                self._frames.extendleft(reversed(frames))
            else:
                self._frames.extend(frames)
            self._bytes += size
        self.wake()
        return True

    def take(self) -> bytes | None:
        with self._lock:
            if not self._frames:
                return None
            frame = self._frames.popleft()
            self._bytes -= len(frame)
            return frame

    def clear(self) -> tuple[int, int]:
        """Drop everything queued; (messages, bytes) dropped."""
        with self._lock:
            dropped = (len(self._frames), self._bytes)
            self._frames.clear()
            self._bytes = 0
            return dropped

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self._frames), self._bytes


# --- what a link tells its session ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkOpen:
    link: int


@dataclass(frozen=True, slots=True)
class LinkReady:
    link: int


@dataclass(frozen=True, slots=True)
class LinkFrame:
    link: int
    message: wire.ServerMessage


@dataclass(frozen=True, slots=True)
class LinkDown:
    """The link ended: `reason` is a terminal reason (`connect_timeout`, `setup_timeout`,
    `connect_failed`, `protocol_error`, `internal_error`) or `transport_lost`."""

    link: int
    reason: str
    detail: str
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Dial:
    """Everything one connection attempt needs."""

    url: str
    api_key: str | None = field(repr=False)
    setup_frame: bytes
    connect_timeout_s: float
    setup_timeout_s: float


class Link:
    """One WebSocket connection of a session; see the module docstring."""

    def __init__(
        self,
        live_loop: LiveLoop,
        link_id: int,
        dial: Dial,
        outbox: Outbox,
        post: Callable[[Any], None],
        wait_first: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.id = link_id
        self._loop = live_loop
        self._dial = dial
        self._outbox = outbox
        self._post = post
        self._wait_first = wait_first
        self._ws: ClientConnection | None = None
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._writer_failure: BaseException | None = None
        live_loop.call(self._begin)

    def _begin(self) -> None:
        self._wake = asyncio.Event()
        wake = self._wake
        self._outbox.wake = lambda: self._loop.call(wake.set)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Close cleanly (a close frame with `code`); nothing more is reported."""
        self._loop.call(self._close, code, reason)

    def _close(self, code: int, reason: str) -> None:
        self._closing = True
        ws, task = self._ws, self._task
        if ws is not None:
            asyncio.get_running_loop().create_task(_close_ws(ws, code, reason))
        elif task is not None:
            task.cancel()

    async def _tell(self, message: Any) -> bool:
        """Hand `message` to the session, waiting while its inbox is full; False if the
        session is gone or the link is closing."""
        while not self._closing:
            try:
                self._post(message)
                return True
            except PhloemError as err:
                if err.kind != "backpressure":
                    return False
            await asyncio.sleep(POST_RETRY_S)
        return False

    async def _run(self) -> None:
        # One `live_connect` span per connection attempt (the first and each resumed
        # reconnect), from dialling to `setupComplete`, ended with the failure's reason.
        sp = telemetry.start_span(
            "live_connect",
            {"phloem.live.link": self.id, "server.address": urlsplit(self._dial.url).hostname},
            kind=SpanKind.CLIENT,
        )
        outcome: list[str] = ["cancelled"]
        try:
            await self._connect_and_serve(sp, outcome)
        except _WriterFailed as exc:
            await self._failed("writer", exc.cause)
        except Exception as exc:  # a bug or a library's surprise: the session must hear
            if outcome[0]:
                outcome[0] = "internal_error"
            await self._failed("reader", exc)
        finally:
            if outcome[0]:  # not set up: the attempt's span ends with why
                telemetry.end_span(sp, outcome[0])

    async def _connect_and_serve(self, sp: Any, outcome: list[str]) -> None:
        dial = self._dial
        if self._wait_first is not None:
            await self._wait_first()
        headers = {"x-goog-api-key": dial.api_key} if dial.api_key else {}
        try:
            ws = await asyncio.wait_for(
                connect(
                    dial.url,
                    additional_headers=headers,
                    max_size=wire.MAX_SERVER_FRAME_BYTES,
                    open_timeout=None,
                    close_timeout=CLOSE_TIMEOUT_S,
                    compression=None,
                    user_agent_header="phloem-live",
                    proxy=None,
                ),
                dial.connect_timeout_s,
            )
        except TimeoutError:
            outcome[0] = "connect_timeout"
            await self._tell(LinkDown(self.id, "connect_timeout", "no connection in time"))
            return
        except (OSError, InvalidHandshake, InvalidURI, ValueError) as exc:
            outcome[0] = "connect_failed"
            await self._tell(LinkDown(self.id, "connect_failed", _why(exc)))
            return
        self._ws = ws
        _small_reads(ws)
        try:
            if self._closing:
                await _close_ws(ws, 1000, "")
                return
            await self._tell(LinkOpen(self.id))
            await ws.send(dial.setup_frame.decode())
            try:
                first = await asyncio.wait_for(ws.recv(), dial.setup_timeout_s)
            except TimeoutError:
                outcome[0] = "setup_timeout"
                await self._tell(LinkDown(self.id, "setup_timeout", "no setupComplete in time"))
                await _close_ws(ws, 1000, "setup timeout")
                return
            if not await self._frame(first, setup=True):
                outcome[0] = "setup_failed"
                return
            outcome[0] = ""  # set up: the span ends now, the connection lives on
            telemetry.end_span(sp)
            writer = asyncio.get_running_loop().create_task(self._write(ws))
            try:
                async for frame in ws:
                    if not await self._frame(frame, setup=False):
                        return
            except ConnectionClosed:
                pass
            finally:
                writer.cancel()
            if self._writer_failure is not None:
                raise _WriterFailed(self._writer_failure)
            await self._lost(ws)
        except ConnectionClosed:
            await self._lost(ws)
        except asyncio.CancelledError:
            await _close_ws(ws, 1001, "going away")
            raise

    async def _frame(self, frame: str | bytes, *, setup: bool) -> bool:
        ws = self._ws
        assert ws is not None
        try:
            message = wire.decode_server(frame)
        except wire.LiveProtocolError as exc:
            await self._tell(LinkDown(self.id, "protocol_error", exc.reason, exc.path))
            await _close_ws(ws, 1007, "protocol error")
            return False
        if setup:
            if message.setup_complete is None:
                await self._tell(
                    LinkDown(
                        self.id,
                        "protocol_error",
                        f"expected setupComplete, got {wire.primary_kind(message)}",
                        "$",
                    )
                )
                await _close_ws(ws, 1002, "protocol error")
                return False
            return await self._tell(LinkReady(self.id))
        self._loop.hold_writes()  # the events of every frame at hand, in one write
        return await self._tell(LinkFrame(self.id, message))

    async def _lost(self, ws: ClientConnection) -> None:
        if self._closing:
            return
        sent = ws.protocol.close_sent
        if sent is not None and sent.code == MESSAGE_TOO_BIG:
            limit = wire.MAX_SERVER_FRAME_BYTES
            await self._tell(LinkDown(self.id, "protocol_error", f"frame exceeds {limit}", "$"))
            return
        code = ws.close_code
        detail = f"connection closed (code {code})" if code is not None else "connection lost"
        await self._tell(LinkDown(self.id, "transport_lost", detail))

    async def _failed(self, task: str, exc: BaseException) -> None:
        """One of this link's tasks failed unexpectedly: log it, close, tell the session."""
        why = _why(exc)
        log.error("live_link_failed", link=self.id, task=task, error=why)
        ws = self._ws
        if ws is not None:
            await _close_ws(ws, INTERNAL_ERROR, "internal error")
        await self._tell(LinkDown(self.id, "internal_error", f"the link's {task} failed: {why}"))

    async def _write(self, ws: ClientConnection) -> None:
        """Send what the outbox holds; a failure other than the connection closing is
        kept for the reader (which then reports it) and closes the socket."""
        wake = self._wake
        assert wake is not None
        try:
            while True:
                frame = self._outbox.take()
                if frame is None:
                    wake.clear()
                    frame = self._outbox.take()
                    if frame is None:
                        await wake.wait()
                        continue
                await ws.send(frame.decode())
        except ConnectionClosed:
            pass  # the reader sees the close as well
        except Exception as exc:
            self._writer_failure = exc
            await _close_ws(ws, INTERNAL_ERROR, "internal error")


class _WriterFailed(Exception):
    """Raised in the reader when the writer failed (`cause`)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _small_reads(ws: ClientConnection) -> None:
    """Read the socket `READ_BYTES` at a time: asyncio's selector transports pass 256 KiB
    to `recv` (`max_size`), a buffer above malloc's mmap threshold, which costs an mmap,
    an mremap and an munmap on every read of a few hundred bytes. Left alone on
    transports without that attribute."""
    transport = ws.transport
    if isinstance(getattr(transport, "max_size", None), int):
        transport.max_size = READ_BYTES  # type: ignore[attr-defined]


async def _close_ws(ws: ClientConnection, code: int, reason: str) -> None:
    try:
        await ws.close(code, reason)
    except Exception:
        pass


def _why(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}", limit=300)
