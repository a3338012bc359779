"""`MemoryEventStore`: what a resumed SSE stream is sent, and its bound."""

from __future__ import annotations

import anyio
from mcp import types
from mcp.server.streamable_http import EventMessage

from phloem.actors.mcp.events import MAX_STORED_EVENTS, MemoryEventStore


def _ping(n: int) -> types.JSONRPCRequest:
    return types.JSONRPCRequest(jsonrpc="2.0", id=n, method="ping")


def _replay(store: MemoryEventStore, after: str) -> tuple[str | None, list[EventMessage]]:
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    async def run() -> str | None:
        return await store.replay_events_after(after, send)

    return anyio.run(run), sent


def _store(store: MemoryEventStore, stream: str, message: types.JSONRPCRequest | None) -> str:
    async def run() -> str:
        return await store.store_event(stream, message)

    return anyio.run(run)


def test_a_resumed_stream_gets_its_own_later_events_only() -> None:
    store = MemoryEventStore()
    priming = _store(store, "a", None)  # the priming event: an id, no message
    first = _store(store, "a", _ping(1))
    _store(store, "b", _ping(2))
    third = _store(store, "a", _ping(3))
    stream, sent = _replay(store, priming)
    assert stream == "a" and [e.event_id for e in sent] == [first, third]
    stream, sent = _replay(store, first)
    assert stream == "a" and [e.message.id for e in sent] == [3]  # type: ignore[union-attr]
    assert _replay(store, "no such id") == (None, [])
    assert MemoryEventStore()  # an empty store is still a store (the SDK tests its truth)


def test_the_store_keeps_exactly_max_stored_events() -> None:
    store = MemoryEventStore()
    ids = [_store(store, "s", _ping(n)) for n in range(MAX_STORED_EVENTS)]
    assert store.size == MAX_STORED_EVENTS
    assert _replay(store, ids[0])[0] == "s"  # the oldest is still there at the limit
    ids.append(_store(store, "s", _ping(MAX_STORED_EVENTS)))  # one over: the oldest goes
    assert store.size == MAX_STORED_EVENTS
    assert _replay(store, ids[0]) == (None, [])
    stream, sent = _replay(store, ids[1])
    assert stream == "s" and len(sent) == MAX_STORED_EVENTS - 1
