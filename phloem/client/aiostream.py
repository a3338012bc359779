"""`AsyncEventStream`: one subscription of an `AsyncClient`, under credit."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from phloem.client.base import decode_as
from phloem.client.protocol import Subscription
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.client.aio import AsyncClient

T = TypeVar("T")


class AsyncEventStream(Subscription, Generic[T]):
    """Events of a subscription, decoded into `event_type`: `async for event in stream`.

    Iteration ends when the stream ends normally (or the client is closed); an abnormal
    end (`backpressure`, `owner_down`, `connection_lost`, ...) raises `PhloemError`.
    Credit goes back to the daemon as you read (in batches of half the window), so the
    daemon never runs ahead of you by more than the window.
    """

    def __init__(
        self, client: AsyncClient, name: str, window: CreditWindow, event_type: Any = Any
    ) -> None:
        super().__init__(name, window)
        self._client = client
        self._type = event_type
        self._waiter: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        """Called by the client when an event arrived or the stream ended."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def recv(self, timeout: float | None = None) -> T:
        """The next event. Waits up to `timeout` seconds (None: until an event arrives,
        the stream ends or the connection drops); `PhloemError` `timeout`, `closed` (ended
        normally) or the end's kind."""
        client = self._client
        if not self.ready:
            client._proto.flush(self)  # credit for what was taken, before waiting for more
            client._flush_queued()
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await waiter
            except TimeoutError:
                raise PhloemError(ErrorKind.TIMEOUT, f"no event within {timeout} s") from None
            finally:
                self._waiter = None
        try:
            item = client._proto.take(self)
        finally:
            client._flush_queued()
        result: T = decode_as(item, self._type)
        return result

    def __aiter__(self) -> AsyncEventStream[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.recv()
        except PhloemError as err:
            if err.kind == ErrorKind.CLOSED:
                raise StopAsyncIteration from None
            raise

    async def aclose(self) -> None:
        """Unsubscribe (waits at most `REPLY_GRACE_S` for the daemon's answer); events
        still buffered are dropped and `recv` raises `closed` from now on."""
        client = self._client
        request = client._proto.unsubscribe(self)
        self._wake()
        if request is None or client.closed:
            return
        with contextlib.suppress(PhloemError):
            await client._request(lambda: request)

    async def __aenter__(self) -> AsyncEventStream[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
