"""`Daemon`: the one connection of `phloem api` to the daemon, opened when first needed
and again after it is lost (a restarted daemon is found again without restarting the
API). Requests and session runs are pipelined over it; a run belongs to it, so the
daemon cancels every run in flight if the API process goes away."""

from __future__ import annotations

import asyncio
from pathlib import Path

from phloem.client.aio import AsyncClient

CONNECT_TIMEOUT_S = 10.0


class Daemon:
    """The daemon at `socket`, as one shared `AsyncClient`."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self._client: AsyncClient | None = None
        self._lock = asyncio.Lock()

    async def client(self) -> AsyncClient:
        """The open connection, connecting first if there is none (`no_daemon` else)."""
        async with self._lock:
            if self._client is None or self._client.error is not None:
                if self._client is not None:
                    await self._client.aclose()
                self._client = await AsyncClient.connect(self.socket, CONNECT_TIMEOUT_S)
            return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
