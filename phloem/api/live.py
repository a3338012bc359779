"""`/run_live`: ADK's live WebSocket, bridged to a phloem Live session.

    GET /run_live?app_name=A&user_id=U&session_id=S&modalities=TEXT   (WebSocket)

The session must be one of app A (as for `/run`). The socket opens a Live session
(`response_modalities` from `modalities`: TEXT or AUDIO, default AUDIO) and then carries,
in, ADK's `LiveRequest` JSON (`content` text parts, a `blob` of audio or an image,
`activityStart`, `activityEnd`, `close`) and, out, ADK `Event` JSON: text and audio as
partial content, `inputTranscription` / `outputTranscription`, `turnComplete`,
`interrupted`, tool calls as function-call parts. Input sent before the Live session is
ready waits for it. A bad message closes the socket with 1007 and one line; the Live
session closing closes the socket (1000, or 1011 with its reason). The Live session is
closed whenever the socket is.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import time
from typing import Any

import msgspec
from aiohttp import WSMsgType, web

from phloem.actors.live.protocol import LiveEvent
from phloem.agents.events import new_event_id
from phloem.api import errors, shapes
from phloem.api.shared import API, Api, find_session, turn_slot
from phloem.client.aio import AsyncClient
from phloem.protocols.errors import ErrorKind, PhloemError

LIVE_MODALITIES = ("TEXT", "AUDIO")
READY_TIMEOUT_S = 60.0  # a Live session not ready by then closes the socket
CLOSE_BAD_INPUT = 1007
CLOSE_INTERNAL = 1011
MAX_REASON_BYTES = 120  # a WebSocket close reason is at most 123 bytes


class BadLiveRequest(Exception):
    """A client message that is not a `LiveRequest` phloem can send."""


def _reason(text: str) -> str:
    return errors.one_line(text).encode()[:MAX_REASON_BYTES].decode("utf-8", "ignore")


def _modalities(request: web.Request) -> list[str]:
    asked = request.query.getall("modalities", []) or ["AUDIO"]
    bad = [m for m in asked if m not in LIVE_MODALITIES]
    if bad:
        raise PhloemError(
            ErrorKind.UNSUPPORTED, f"modalities {bad} are not supported by phloem api (TEXT, AUDIO)"
        )
    return list(dict.fromkeys(asked))


def live_event_json(app: str, event: LiveEvent) -> dict[str, Any] | None:
    """One Live event as an ADK `Event` (None: nothing an ADK client shows)."""
    payload = event.payload
    out: dict[str, Any] = {
        "id": new_event_id(),
        "invocationId": "",
        "author": app,
        "timestamp": event.timestamp or time.time(),
        "actions": shapes.actions_json(),
    }
    kind = event.kind
    if kind in ("text", "thought"):
        part: dict[str, Any] = {"text": payload.get("text", "")}
        if kind == "thought":
            part["thought"] = True
        out |= {"content": {"role": "model", "parts": [part]}, "partial": True}
    elif kind == "audio":
        data = payload.get("data", b"")
        raw = data if isinstance(data, bytes) else base64.b64decode(str(data))
        blob = {"mimeType": payload.get("mime_type", "audio/pcm"), "data": shapes.b64(raw)}
        out |= {"content": {"role": "model", "parts": [{"inlineData": blob}]}, "partial": True}
    elif kind in ("input_transcription", "output_transcription"):
        key = "inputTranscription" if kind == "input_transcription" else "outputTranscription"
        out[key] = {"text": payload.get("text", ""), "finished": bool(payload.get("finished"))}
    elif kind == "tool_call":
        parts = [
            {
                "functionCall": {
                    "name": c.get("name"),
                    "args": c.get("args") or {},
                    "id": c.get("id"),
                }
            }
            for c in payload.get("calls", [])
        ]
        out["content"] = {"role": "model", "parts": parts}
    elif kind == "turn_complete":
        out["turnComplete"] = True
    elif kind == "interrupted":
        out["interrupted"] = True
    else:
        return None
    return out


def live_input(text: str) -> dict[str, Any]:
    """An ADK `LiveRequest` (JSON text) → the keyword arguments of one `live_send`;
    `{}` for `close`. `BadLiveRequest` for anything else."""
    try:
        body = shapes.parse_body(text.encode(), "the live request")
    except PhloemError as err:
        raise BadLiveRequest(err.message) from None
    if body.get("close"):
        return {}
    content = body.get("content")
    if content is not None:
        try:
            return {"text": shapes.message_text({"newMessage": content})}
        except PhloemError as err:
            raise BadLiveRequest(err.message) from None
    blob = body.get("blob")
    if isinstance(blob, dict):
        mime = shapes.field(blob, "mimeType", "mime_type")
        try:
            data = base64.urlsafe_b64decode(str(blob.get("data", "")).encode())
        except (binascii.Error, ValueError):
            raise BadLiveRequest("blob.data is not base64") from None
        if isinstance(mime, str) and mime.startswith("audio/"):
            return {"audio": data}
        if isinstance(mime, str) and mime.startswith("image/"):
            return {"video": data, "video_mime": mime}
        raise BadLiveRequest(f"blob.mimeType {mime!r}: audio/* or image/* only")
    if shapes.field(body, "activityStart", "activity_start") is not None:
        return {"activity": "start"}
    if shapes.field(body, "activityEnd", "activity_end") is not None:
        return {"activity": "end"}
    raise BadLiveRequest("a live request needs content, blob, activityStart, activityEnd or close")


async def _forward_events(
    ws: web.WebSocketResponse, stream: Any, app: str, ready: asyncio.Event, api: Api
) -> str:
    """Live events → the socket until the Live session closes; its close reason."""
    async for event in stream:
        if event.kind == "ready":
            ready.set()
        if event.kind == "closed":
            return str(event.payload.get("reason", "closed"))
        out = live_event_json(app, event)
        if out is not None:
            await asyncio.wait_for(ws.send_bytes(msgspec.json.encode(out)), api.cfg.write_timeout_s)
    return "closed"


async def _forward_input(
    ws: web.WebSocketResponse, client: AsyncClient, ref: str, ready: asyncio.Event
) -> str:
    """Socket messages → the Live session until the client closes or sends `close`."""
    async for message in ws:
        if message.type != WSMsgType.TEXT:
            raise BadLiveRequest("live requests are JSON text messages")
        sent = live_input(message.data)
        if not sent:
            return "client_closed"
        await asyncio.wait_for(ready.wait(), READY_TIMEOUT_S)
        await client.live_send(ref, **sent)
    return "client_closed"


async def run_live(request: web.Request) -> web.StreamResponse:
    api = request.app[API]
    query = request.query
    app = query.get("app_name", "")
    modalities = _modalities(request)
    await find_session(api, app, query.get("user_id", ""), query.get("session_id", ""), 1)
    client = await api.daemon.client()
    ws = web.WebSocketResponse(max_msg_size=api.cfg.max_body_bytes)
    async with turn_slot(api):
        ref = await client.live_open({"response_modalities": modalities})
        try:
            stream = await client.live_events(ref)
            ready = asyncio.Event()
            status = await client.live_status(ref)
            if status.get("state") == "active":
                ready.set()
            await ws.prepare(request)
            code, reason = await _bridge(ws, client, ref, stream, app, ready, api)
        finally:
            with contextlib.suppress(PhloemError):
                await client.live_close(ref)
        await ws.close(code=code, message=_reason(reason).encode())
    return ws


async def _bridge(
    ws: web.WebSocketResponse,
    client: AsyncClient,
    ref: str,
    stream: Any,
    app: str,
    ready: asyncio.Event,
    api: Api,
) -> tuple[int, str]:
    """Run both directions until one ends; the close code and reason for the socket."""
    events = asyncio.create_task(_forward_events(ws, stream, app, ready, api))
    inputs = asyncio.create_task(_forward_input(ws, client, ref, ready))
    done, pending = await asyncio.wait({events, inputs}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    task = done.pop()
    try:
        reason = task.result()
    except BadLiveRequest as err:
        return CLOSE_BAD_INPUT, str(err)
    except PhloemError as err:
        return CLOSE_INTERNAL, f"{err.kind}: {err.message}"
    except (TimeoutError, OSError):
        api.counters["clients_dropped"] += 1
        return CLOSE_INTERNAL, "the client did not keep up"
    if task is events and reason not in ("client_closed", "closed"):
        return CLOSE_INTERNAL, f"the Live session closed: {reason}"
    return 1000, reason
