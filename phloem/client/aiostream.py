"""`AsyncEventStream`: one subscription of an `AsyncClient`, under credit."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from phloem.client.base import decode_as
from phloem.client.socket import REPLY_GRACE_S
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.protocols.wire import Credit, Unsubscribe, encode_frame

if TYPE_CHECKING:
    from phloem.client.aio import AsyncClient

T = TypeVar("T")


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
