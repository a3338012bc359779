"""The phloem client: `Client` (blocking; over the daemon's socket or an embedded tree's
in-process transport) and `AsyncClient` (asyncio; one pipelined socket connection).
Feature methods live in one module per feature here (`planning`, `agents`, ...), each
with its blocking and its asyncio mixin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.client.aio import (
        AsyncClient as AsyncClient,
    )
    from phloem.client.sync import (
        Client as Client,
    )

_EXPORTS: dict[str, str] = {
    "AsyncClient": "phloem.client.aio",
    "Client": "phloem.client.sync",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
