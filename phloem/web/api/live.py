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

Beyond ADK (phloem's own, for a browser voice client; an ADK client never needs them):

- **Owner-bound, one socket per session**: the Live session belongs to the socket that
  opened it and is closed when the socket ends, however it ends (close, a dropped TCP
  connection, a bad message, this process stopping) — fail-closed, never left running
  for a client that is gone. A second `/run_live` for a session with one open waits up
  to `LEASE_WAIT_S` for it to end, then is refused (503 `backpressure`): the socket holds
  the session's lease.
- **Binary voice frames**: a binary message is raw PCM audio in (16-bit, 16 kHz mono,
  at most `MAX_VOICE_FRAME_BYTES`, no base64); with `audio=binary` model audio comes out
  as binary messages too (24 kHz PCM) and every other event as JSON text.
- **Voice-activity admission**: `activity=manual` opens the session with automatic
  activity detection off; audio is then admitted only between `activityStart` and
  `activityEnd`. With the default (`activity=auto`) the server's detector decides, and
  `activityStart`/`activityEnd` are refused. Either way audio sent before the session is
  ready waits for it. Server voice-activity signals come out as events with
  `customMetadata.phloem.voiceActivity`; `reconnecting` and `goAway` (the Live session
  resuming its provider connection, the socket staying open) as
  `customMetadata.phloem.liveEvent`.
- **Credit/ack and interruption**: `credit=N`, `{"ack": k}` and the bounded queue are in
  liveflow.py; an `interrupted` event drops queued model audio of the interrupted turn.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import WSMsgType, web

from phloem.actors.live.protocol import LiveEvent
from phloem.agents.events import new_event_id
from phloem.client.aio import AsyncClient
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.web.api import errors, shapes
from phloem.web.api.liveflow import MAX_CREDIT, BadAck, Outbox, Outgoing, SlowClient
from phloem.web.api.shared import API, Api, find_session, turn_slot

LIVE_MODALITIES = ("TEXT", "AUDIO")
READY_TIMEOUT_S = 60.0  # a Live session not ready by then closes the socket
CLOSE_BAD_INPUT = 1007
CLOSE_INTERNAL = 1011
MAX_REASON_BYTES = 120  # a WebSocket close reason is at most 123 bytes
MAX_VOICE_FRAME_BYTES = 65_536  # one binary audio message: 2 s of 16 kHz 16-bit mono
VOICE_MIME = "audio/pcm;rate=16000"


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


def _choice(request: web.Request, name: str, choices: tuple[str, ...]) -> str:
    value = request.query.get(name, choices[0])
    if value not in choices:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{name}={value!r}: one of {choices}")
    return value


def _credit(request: web.Request) -> int | None:
    raw = request.query.get("credit")
    if raw is None:
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_CREDIT:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"credit={raw!r}: 1 to {MAX_CREDIT}")
    return int(raw)


class Admission:
    """Which input the Live session takes now: activity signals only in manual mode,
    audio in manual mode only inside an activity."""

    def __init__(self, manual: bool) -> None:
        self.manual = manual
        self.speaking = False

    def admit(self, sent: dict[str, Any]) -> None:
        activity = sent.get("activity")
        if activity is not None:
            if not self.manual:
                raise BadLiveRequest(f"activity{activity.title()}: only with activity=manual")
            if (activity == "start") == self.speaking:
                raise BadLiveRequest(f"activity{activity.title()} out of order")
            self.speaking = activity == "start"
        elif "audio" in sent and self.manual and not self.speaking:
            raise BadLiveRequest("audio outside activityStart/activityEnd (activity=manual)")


def voice_input(data: bytes) -> dict[str, Any]:
    """One binary message → the `live_send` arguments of its audio."""
    if not data or len(data) > MAX_VOICE_FRAME_BYTES:
        raise BadLiveRequest(f"a binary audio message holds 1 to {MAX_VOICE_FRAME_BYTES} bytes")
    if len(data) % 2:
        raise BadLiveRequest("binary audio is 16-bit PCM: an even number of bytes")
    return {"audio": data}


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
    elif kind == "voice_activity":
        signal = {"signal": payload.get("signal", "unspecified")}
        if "audio_offset_ms" in payload:
            signal["audioOffsetMs"] = payload["audio_offset_ms"]
        out["customMetadata"] = {"phloem": {"voiceActivity": signal}}
    elif kind in ("reconnecting", "go_away"):
        out["customMetadata"] = {"phloem": {"liveEvent": kind}}
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
    if "ack" in body:
        count = body["ack"]
        if not isinstance(count, int) or isinstance(count, bool):
            raise BadLiveRequest("ack is a count of messages")
        return {"ack": count}
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


def _outgoing(app: str, event: LiveEvent, binary_audio: bool) -> Outgoing | None:
    if event.kind == "audio" and binary_audio:
        data = event.payload.get("data", b"")
        raw = data if isinstance(data, bytes) else base64.b64decode(str(data))
        return Outgoing(raw, binary=True, audio_generation=event.generation_epoch)
    out = live_event_json(app, event)
    if out is None:
        return None
    generation = event.generation_epoch if event.kind == "audio" else None
    return Outgoing(msgspec.json.encode(out), audio_generation=generation)


async def _forward_events(
    stream: Any, app: str, ready: asyncio.Event, outbox: Outbox, binary_audio: bool, api: Api
) -> str:
    """Live events → the outbox until the Live session closes; its close reason."""
    async for event in stream:
        if event.kind == "ready":
            ready.set()
        if event.kind == "closed":
            return str(event.payload.get("reason", "closed"))
        if event.kind == "interrupted":
            api.counters["live_interruptions"] += 1
            api.counters["live_stale_audio_dropped"] += outbox.interrupt(event.generation_epoch)
        message = _outgoing(app, event, binary_audio)
        if message is not None:
            outbox.put(message)
    return "closed"


async def _send_out(ws: web.WebSocketResponse, outbox: Outbox, api: Api) -> str:
    """The outbox → the socket, as credit allows (runs until cancelled)."""
    while True:
        message = await outbox.next()
        send = ws.send_bytes(message.data) if message.binary else ws.send_str(message.data.decode())
        await asyncio.wait_for(send, api.cfg.write_timeout_s)


async def _forward_input(
    ws: web.WebSocketResponse,
    client: AsyncClient,
    ref: str,
    ready: asyncio.Event,
    outbox: Outbox,
    admission: Admission,
) -> str:
    """Socket messages → the Live session until the client closes or sends `close`."""
    async for message in ws:
        if message.type == WSMsgType.BINARY:
            sent = voice_input(message.data)
        elif message.type == WSMsgType.TEXT:
            sent = live_input(message.data)
        else:
            raise BadLiveRequest("live requests are JSON text or binary audio messages")
        if not sent:
            return "client_closed"
        if "ack" in sent:
            outbox.ack(sent["ack"])
            continue
        admission.admit(sent)
        await asyncio.wait_for(ready.wait(), READY_TIMEOUT_S)
        await client.live_send(ref, **sent)
    return "client_closed"


@dataclass(frozen=True)
class Flow:
    """What one socket asked for: its outbox (credit), its admission, binary audio out."""

    outbox: Outbox
    admission: Admission
    binary_audio: bool


LEASE_WAIT_S = 5.0
"""How long a socket waits for the session's previous one to let go (a client that closed
its socket hears the close before the server has closed that socket's Live session)."""
LEASE_POLL_S = 0.02


@contextlib.asynccontextmanager
async def _lease(api: Api, session_id: str) -> AsyncIterator[None]:
    """The session's one live socket: a second waits up to `LEASE_WAIT_S` for the first to
    end, then is refused (503 `backpressure`)."""
    deadline = asyncio.get_running_loop().time() + LEASE_WAIT_S
    while session_id in api.live_leases:
        if asyncio.get_running_loop().time() >= deadline:
            raise PhloemError(
                ErrorKind.BACKPRESSURE, f"session {session_id!r} has a live socket open already"
            )
        await asyncio.sleep(LEASE_POLL_S)
    api.live_leases.add(session_id)
    try:
        yield
    finally:
        api.live_leases.discard(session_id)


async def run_live(request: web.Request) -> web.StreamResponse:
    api = request.app[API]
    query = request.query
    app = query.get("app_name", "")
    modalities = _modalities(request)
    flow = Flow(
        Outbox(_credit(request)),
        Admission(_choice(request, "activity", ("auto", "manual")) == "manual"),
        _choice(request, "audio", ("json", "binary")) == "binary",
    )
    session_id = query.get("session_id", "")
    await find_session(api, app, query.get("user_id", ""), session_id, 1)
    client = await api.daemon.client()
    ws = web.WebSocketResponse(max_msg_size=api.cfg.max_body_bytes)
    config: dict[str, Any] = {"response_modalities": modalities}
    if flow.admission.manual:
        config["automatic_activity_detection"] = False
    async with turn_slot(api), _lease(api, session_id):
        ref = await client.live_open(config)
        try:
            stream = await client.live_events(ref)
            ready = asyncio.Event()
            status = await client.live_status(ref)
            if status.get("state") == "active":
                ready.set()
            await ws.prepare(request)
            code, reason = await _bridge(ws, client, ref, stream, app, ready, api, flow)
        finally:
            with contextlib.suppress(PhloemError):
                await client.live_close(ref)
    # The Live session is closed and the lease free before the client hears the close:
    # a client reconnecting at once finds the session's socket available.
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
    flow: Flow,
) -> tuple[int, str]:
    """Run both directions until one ends; the close code and reason for the socket."""
    outbox = flow.outbox
    events = asyncio.create_task(
        _forward_events(stream, app, ready, outbox, flow.binary_audio, api)
    )
    inputs = asyncio.create_task(_forward_input(ws, client, ref, ready, outbox, flow.admission))
    sender = asyncio.create_task(_send_out(ws, outbox, api))
    done, pending = await asyncio.wait(
        {events, inputs, sender}, return_when=asyncio.FIRST_COMPLETED
    )
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    task = done.pop()
    try:
        reason = task.result()
    except (BadLiveRequest, BadAck) as err:
        return CLOSE_BAD_INPUT, str(err)
    except PhloemError as err:
        return CLOSE_INTERNAL, f"{err.kind}: {err.message}"
    except (TimeoutError, OSError, SlowClient):
        api.counters["clients_dropped"] += 1
        return CLOSE_INTERNAL, "the client did not keep up"
    if task is events and reason not in ("client_closed", "closed"):
        return CLOSE_INTERNAL, f"the Live session closed: {reason}"
    return 1000, reason
