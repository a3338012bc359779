"""The phloem client: `Client` (blocking) and `AsyncClient` (asyncio), over the daemon's
socket (`Client` also over an embedded tree's in-process transport). Feature methods live in one module per
feature here (`planning`, `agents`, ...), mixed into `Client`."""

from phloem.client.aio import AsyncClient
from phloem.client.sync import Client

__all__ = ["AsyncClient", "Client"]
