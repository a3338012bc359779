"""The phloem client: `Client` (blocking; over the daemon's socket or an embedded tree's
in-process transport) and `AsyncClient` (asyncio; one pipelined socket connection).
Feature methods live in one module per feature here (`planning`, `agents`, ...), each
with its blocking and its asyncio mixin."""

from phloem.client.aio import AsyncClient
from phloem.client.sync import Client

__all__ = ["AsyncClient", "Client"]
