"""Gemini Live sessions: each session a supervised actor owning one WebSocket.

`service.LiveService` (actor path `live/service`) opens sessions and routes requests;
`session.LiveSession` is one session's state machine (lifecycle, reconnects with
resumption, subscribers under credit, epochs, queued input, tool calls);
`transport` moves frames on one shared asyncio loop; `tools` runs managed Live tool
calls in capped process children; `options` turns `live_open`'s config into the setup
frame; `protocol` holds the service messages and the `LiveEvent` envelope; `settings`
the `[live]` section. The wire format itself is `phloem.protocols.live`.
"""
