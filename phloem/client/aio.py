"""`phloem.AsyncClient`: every `Client` method as a coroutine."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator
from typing import Any

from phloem.client.base import EventStream
from phloem.client.socket import DEFAULT_CONNECT_TIMEOUT_S
from phloem.client.sync import Client
from phloem.protocols.errors import PhloemError
from phloem.supervision.credit import CreditWindow


class AsyncEventStream:
    """`EventStream` for asyncio: `async for event in stream`."""

    def __init__(self, stream: EventStream[Any]) -> None:
        self._stream = stream

    async def recv(self, timeout: float | None = None) -> Any:
        return await asyncio.to_thread(self._stream.recv, timeout)

    async def __aiter__(self) -> AsyncIterator[Any]:
        while True:
            try:
                yield await self.recv()
            except PhloemError as err:
                if err.kind == "closed":
                    return
                raise

    async def aclose(self) -> None:
        await asyncio.to_thread(self._stream.close)


class AsyncClient:
    """Every `Client` method as a coroutine (run in a worker thread), features included.

    async with await AsyncClient.connect() as client:
        await client.ask("echo", 1)
    """

    def __init__(self, client: Client) -> None:
        self.sync = client

    @classmethod
    async def connect(
        cls, path: str | os.PathLike[str] | None = None, timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    ) -> AsyncClient:
        return cls(await asyncio.to_thread(Client.connect, path, timeout))

    async def subscribe(
        self, stream: str, window: CreditWindow | None = None, *, event_type: Any = Any
    ) -> AsyncEventStream:
        sync_stream = await asyncio.to_thread(
            functools.partial(self.sync.subscribe, stream, window, event_type=event_type)
        )
        return AsyncEventStream(sync_stream)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.sync, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(functools.partial(attr, *args, **kwargs))

        call.__name__ = name
        return call

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
