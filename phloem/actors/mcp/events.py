"""`MemoryEventStore`: the SSE events of `phloem mcp serve --http`, kept for resumption.

The SDK's streamable-HTTP server transport numbers each SSE event it sends through an
`EventStore`; a client whose stream broke reconnects with `Last-Event-ID` and is sent
the events of that stream after it. This store keeps the last `MAX_STORED_EVENTS` events
of all streams (oldest dropped first), so its memory is bounded however long a session
runs; an id that was dropped (or never issued) replays nothing.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage

MAX_STORED_EVENTS = 1024
"""Most SSE events kept for resumption (over all streams of one server)."""


class MemoryEventStore(EventStore):
    """A bounded in-memory `EventStore`; see the module docstring."""

    def __init__(self, limit: int = MAX_STORED_EVENTS) -> None:
        self.limit = limit
        self._events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None]] = OrderedDict()
        self._ids = itertools.count(1)

    @property
    def size(self) -> int:
        """Events kept. (No `__len__`: the SDK tests a store for truth, and an empty one
        must still count as configured.)"""
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self.limit:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._events.get(last_event_id)
        if found is None:
            return None
        stream_id = found[0]
        later = False
        for event_id, (stream, message) in list(self._events.items()):
            if later and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            later = later or event_id == last_event_id
        return stream_id
