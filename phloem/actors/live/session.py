"""One Live session: a supervised actor owning one WebSocket at a time.

Its state machine (the only place that changes session state, on the actor's thread)::

    connecting ─> setup_pending ─> active ⇄ reconnecting
         │               │           │            │
         └───────────────┴───────────┴────────────┴──> closed(reason)

- The first connection failing ends the session: `connect_timeout`, `connect_failed`,
  `setup_timeout`, `protocol_error`.
- An active session that loses its transport, or gets `goAway`, reconnects with the
  latest resumption handle — only if the server's last `sessionResumptionUpdate` said
  `resumable` and gave one; a handle is used for one resumed session. Without one it
  ends `resumption_unavailable` (never a fresh session passed off as the old one).
  Attempts wait `backoff_base_ms * 2^min(attempt, 6)` (capped at `backoff_max_ms`); after
  `max_reconnect_attempts` failed ones in a row it ends `reconnect_exhausted`. However
  they go, at most `max_reconnects_per_window` reconnects fit in any `reconnect_window_s`:
  one more ends it `reconnect_limit` (a server whose resumed connections all open and then
  drop would otherwise be redialled for ever). Queued input and in-flight tool calls are
  dropped and reported in the `reconnecting` event, never replayed. The ref and topic
  stay the same.
- A malformed server frame ends it `protocol_error`; `live_close` → `client_closed`;
  the owner going away → `owner_gone`; the tree stopping → `shutdown`; an exception
  nothing expected, in this actor or in a task of its link → `internal_error` (one log
  line). Every end closes the socket and publishes a last `closed` event.

Events carry `sequence`, `turn_epoch` (bumped after each `turn_complete`) and
`generation_epoch` (bumped after each `interrupted`, which also drops output audio not
yet delivered to subscribers). Resumption handles and the API key never leave here.
Server voice-activity signals become `voice_activity` events (`signal` start | end |
unspecified); transcriptions carry the language and speaker the server names.

Instruments (with telemetry on; low cardinality): `phloem.live.sessions` (`event`
opened | resumed | closed, and the close `reason`), `phloem.live.media.frames` /
`phloem.live.media.bytes` (`direction` in | out, `kind` audio | video) and
`phloem.live.tool_calls` (`managed`).

Threads: the session is a light actor (no thread of its own). An idle session handles a
send in the client connection's thread and a server frame on the socket loop's thread,
with no hand-off; a busy one queues them for the light pool, in order as always.

Size: one module on purpose — it is the state machine above, and every transition
shares the same link, outbox, tool runner and topic.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import msgspec

from phloem.actors.live import options as live_options
from phloem.actors.live.protocol import LiveClosed, LiveEvent, LiveSend, LiveSent, LiveStatus
from phloem.actors.live.settings import LiveConfig
from phloem.actors.live.tools import Toolbox, ToolDone, ToolRunner
from phloem.actors.live.transport import (
    Dial,
    Link,
    LinkDown,
    LinkFrame,
    LinkOpen,
    LinkReady,
    LiveLoop,
    Outbox,
)
from phloem.actors.services import Call
from phloem.actors.streams import Topic
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.models.interceptors import NO_INTERCEPTORS, CallInfo, Interceptors
from phloem.protocols import live as wire
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.secrets import redact
from phloem.supervision import timers
from phloem.supervision.actor import Actor
from phloem.supervision.reasons import ExitReason
from phloem.supervision.spec import Launcher

log = get_logger("phloem.live")

# Messages a session's inbox holds: server frames wait in the socket while it is full.
SESSION_MAX_INBOX = 1024
MAX_BACKOFF_DOUBLINGS = 6
MAX_DETAIL_CHARS = 300


@dataclass(eq=False)
class SessionInfo:
    """What `live list` shows of a session; written by the session, read by the service."""

    number: int
    model: str
    owner: str
    state: str = "connecting"
    reconnects: int = 0
    opened_at: float = field(default_factory=time.time)
    turn_epoch: int = 0
    generation_epoch: int = 0


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """Everything a session actor is started with."""

    info: SessionInfo
    options: live_options.SessionOptions
    topic: Topic
    loop: LiveLoop
    url: str
    api_key: str | None = field(repr=False)
    config: LiveConfig
    tools: Toolbox | None
    # The tree's chain when the session opened: its managed tool calls go through it
    # (plugins, telemetry, tool policy), as any agent's tool calls do.
    interceptors: Interceptors = NO_INTERCEPTORS
    # Where its managed tool calls run (`[cluster]` kind `tools`; None: this machine).
    launcher: Launcher | None = None


@dataclass(frozen=True, slots=True)
class Forward:
    """A client request for this session, answered through `call`."""

    call: Call
    request: Any


@dataclass(frozen=True, slots=True)
class CloseSession:
    """End the session (`owner_gone`, `client_closed`); `call` is answered when done."""

    reason: str
    call: Call | None = None


@dataclass(frozen=True, slots=True)
class _Redial:
    token: int


class _KindOnly(msgspec.Struct):
    kind: str = ""


_kind_decoder = msgspec.msgpack.Decoder(_KindOnly)


class ReconnectWindow:
    """The reconnects of the last `window_s` seconds, at most `limit` of them (a sliding
    window: a reconnect leaves it `window_s` after it was made)."""

    def __init__(
        self, limit: int, window_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._times: collections.deque[float] = collections.deque()

    def admit(self) -> bool:
        """Count one more reconnect now; False (nothing counted) when the window is full."""
        now = self._clock()
        while self._times and now - self._times[0] >= self.window_s:
            self._times.popleft()
        if len(self._times) >= self.limit:
            return False
        self._times.append(now)
        return True


def _count_media(direction: str, kind: str, nbytes: int) -> None:
    """One media frame in the Live instruments (`phloem.live.media.*`, by direction and
    kind: a handful of series)."""
    telemetry.count("phloem.live.media.frames", direction=direction, kind=kind)
    telemetry.count("phloem.live.media.bytes", nbytes, direction=direction, kind=kind)


def _transcription(t: wire.Transcription) -> dict[str, Any]:
    """A transcription event's payload: text, finished, and the metadata the server sent."""
    payload: dict[str, Any] = {"text": t.text, "finished": bool(t.finished)}
    if t.language_code is not None:
        payload["language"] = t.language_code
    if t.speaker_label is not None:
        payload["speaker"] = t.speaker_label
    return payload


def _is_audio(item: bytes) -> bool:
    try:
        return _kind_decoder.decode(item).kind == "audio"
    except msgspec.DecodeError:
        return False


class LiveSession(Actor):
    """The actor of one Live session; see the module docstring."""

    max_inbox = SESSION_MAX_INBOX
    # No thread of its own: its handlers never block, so a frame from the socket loop or
    # a send from a client connection is handled in that thread when the session is idle
    # (`ActorHandle.tell_here`), with no hand-off; otherwise on the light pool.
    light = True

    def __init__(self, spec: SessionSpec) -> None:
        super().__init__()
        self.spec = spec
        self.cfg = spec.config
        self.info = spec.info
        self.topic = spec.topic
        self.outbox = Outbox(self.cfg.max_ingress_messages, self.cfg.max_ingress_bytes)
        self.state = "connecting"
        self.link: Link | None = None
        self.link_id = 0
        self.ever_active = False
        self.resuming = False
        self.handle: str | None = None  # the latest usable resumption handle: never published
        self.attempt = 0
        self.reconnects = 0
        self.recent_reconnects = ReconnectWindow(
            self.cfg.max_reconnects_per_window, self.cfg.reconnect_window_s
        )
        self.sequence = 0
        self.turn_epoch = 0
        self.generation_epoch = 0
        self.dropped_inputs = 0
        self.close_reason: str | None = None
        self._redial_token = 0
        self._timer: timers.Timer | None = None
        self.runner: ToolRunner | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        me = self._phloem_handle
        assert me is not None
        self._tell = me.tell
        self._tell_here = me.tell_here
        box = self.spec.tools
        if box is not None and box.tools:
            self.runner = ToolRunner(
                box.tools,
                self.cfg.tool_calls,
                self._tool_done,
                isolated=box.isolated,
                tool_context=box.tool_context,
                interceptors=self.spec.interceptors,
                launcher=self.spec.launcher,
                info=CallInfo(
                    kind="agent",
                    agent=f"live-session-{self.spec.info.number}",
                    session_id=str(self.spec.info.number),
                    target="LiveSession",
                ),
            )
        self._dial(wait_first=self.cfg.first_subscriber_wait_s > 0)

    def on_stop(self) -> None:
        if self.state != "closed":
            self._end("shutdown", "the tree is stopping", exit_actor=False)

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # The actor already logged `actor_failed`; the session still ends as every
        # session does: socket closed, a last `closed` event.
        what = type(exception_value).__name__ if exception_value is not None else "failure"
        self._end("internal_error", f"the session failed: {what}", exit_actor=False)

    def _tool_done(self, done: ToolDone) -> None:
        try:
            self._tell(done)
        except PhloemError:
            pass  # the session ended meanwhile

    def _dial(self, *, wait_first: bool = False) -> None:
        self.link_id += 1
        setup = self.spec.options.setup
        if self.spec.options.resumption:
            handle = self.handle if self.resuming else None
            setup = msgspec.structs.replace(
                setup, session_resumption=wire.SessionResumptionConfig(handle)
            )
        dial = Dial(
            url=self.spec.url,
            api_key=self.spec.api_key,
            setup_frame=wire.encode_client(wire.ClientMessage(setup=setup)),
            connect_timeout_s=self.cfg.connect_timeout_s,
            setup_timeout_s=self.cfg.setup_timeout_s,
        )
        self.link = Link(
            self.spec.loop,
            self.link_id,
            dial,
            self.outbox,
            self._tell_here,
            self._wait_first if wait_first else None,
        )

    async def _wait_first(self) -> None:
        """Hold the first dial until someone subscribed (or the wait passed)."""
        import asyncio

        stream = self.topic.stream
        if stream.subscriber_count() > 0:
            return
        arrived = asyncio.Event()
        loop = self.spec.loop
        stream.on_subscribe = lambda: loop.call(arrived.set)
        try:
            if stream.subscriber_count() == 0:
                await asyncio.wait_for(arrived.wait(), self.cfg.first_subscriber_wait_s)
        except TimeoutError:
            pass
        finally:
            stream.on_subscribe = None

    def _set_state(self, state: str) -> None:
        self.state = state
        self.info.state = state

    # -- the inbox -----------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        match message:
            case LinkFrame(link=link) if link == self.link_id:
                self._server(message.message)
            case LinkReady(link=link) if link == self.link_id:
                self._ready()
            case LinkOpen(link=link) if link == self.link_id:
                self._set_state("setup_pending")
            case LinkDown(link=link) if link == self.link_id:
                self._down(message)
            case Forward():
                self._request(message)
            case CloseSession():
                self._end(message.reason, "")
                if message.call is not None:
                    message.call.reply(LiveClosed(message.reason))
            case _Redial(token=token) if token == self._redial_token:
                if self.state == "reconnecting":
                    self._dial()
            case ToolDone(link=link) if link == self.link_id and self.state == "active":
                self._answer_tool(message)
        return None

    def _ready(self) -> None:
        resumed = self.resuming
        if resumed:
            self.handle = None  # a handle resumes one session; the next comes in an update
            self.resuming = False
        self.attempt = 0
        self.ever_active = True
        self._set_state("active")
        self._publish("ready", {"resumed": resumed, "reconnects": self.reconnects})
        telemetry.count("phloem.live.sessions", event="resumed" if resumed else "opened")

    def _down(self, down: LinkDown) -> None:
        detail = redact(down.detail, limit=MAX_DETAIL_CHARS)
        if down.reason == "protocol_error":
            self._end("protocol_error", f"{detail} at {down.path or '$'}")
        elif down.reason == "internal_error" or not self.ever_active:
            self._end(down.reason, detail)
        else:
            self._recover(f"{down.reason}: {detail}")

    def _recover(self, why: str) -> None:
        """Reconnect with the latest handle, or end the session (module docstring)."""
        if self.link is not None:
            self.link.close(1000, "reconnecting")
            self.link = None
        self.link_id += 1  # whatever the old link still reports is stale now
        if not (self.spec.options.resumption and self.handle):
            self._end("resumption_unavailable", f"{why}; the server offered no resumable handle")
            return
        if self.attempt >= self.cfg.max_reconnect_attempts:
            self._end("reconnect_exhausted", f"{why}; {self.attempt} attempts failed")
            return
        if not self.recent_reconnects.admit():
            window = self.recent_reconnects
            self._end(
                "reconnect_limit",
                f"{why}; {window.limit} reconnects within {window.window_s:g} s already",
            )
            return
        doublings = min(self.attempt, MAX_BACKOFF_DOUBLINGS)
        delay_ms = min(self.cfg.backoff_base_ms * 2**doublings, self.cfg.backoff_max_ms)
        self.attempt += 1
        self.reconnects += 1
        self.info.reconnects = self.reconnects
        self.resuming = True
        messages, nbytes = self.outbox.clear()
        self.dropped_inputs += messages
        cancelled = self.runner.cancel_all() if self.runner is not None else 0
        self._set_state("reconnecting")
        self._publish(
            "reconnecting",
            {
                "attempt": self.attempt,
                "delay_ms": delay_ms,
                "reason": why,
                "dropped_messages": messages,
                "dropped_bytes": nbytes,
                "cancelled_tool_calls": cancelled,
            },
        )
        self._redial_token += 1
        self._timer = timers.call_later(delay_ms / 1000, self._redial, self._redial_token)

    def _redial(self, token: int) -> None:
        try:
            self._tell(_Redial(token))
        except PhloemError:
            pass

    def _end(self, reason: str, detail: str, *, exit_actor: bool = True) -> None:
        if self.state == "closed":
            return
        self.close_reason = reason
        self._set_state("closed")
        telemetry.count("phloem.live.sessions", event="closed", reason=reason)
        if self._timer is not None:
            self._timer.cancel()
        if self.link is not None:
            self.link.close(1000, "")
            self.link = None
        self.link_id += 1
        self.outbox.clear()
        if self.runner is not None:
            self.runner.shutdown()
        if not self.topic.closed:
            try:
                self._publish("closed", {"reason": reason, "detail": redact(detail)})
            except PhloemError:
                pass
            self.topic.close()
        log.info("live_session_closed", session=self.info.number, reason=reason)
        if exit_actor:
            self.exit(ExitReason.normal())

    # -- server frames -------------------------------------------------------------------

    def _server(self, message: wire.ServerMessage) -> None:
        if message.session_resumption_update is not None:
            update = message.session_resumption_update
            self.handle = update.new_handle if update.resumable and update.new_handle else None
        elif message.server_content is not None:
            self._content(message.server_content)
        elif message.tool_call is not None:
            self._tool_call(message.tool_call)
        elif message.tool_call_cancellation is not None:
            ids = list(message.tool_call_cancellation.ids)
            cancelled = self.runner.cancel(ids) if self.runner is not None else 0
            self._publish("tool_call_cancellation", {"ids": ids, "cancelled": cancelled})
        elif message.go_away is not None:
            left = wire.duration_ms(message.go_away.time_left)
            self._publish("go_away", {"time_left_ms": left})
            if self.spec.options.resumption and self.handle:
                self._recover("go_away")
            # without a usable handle the session runs until the server drops it
        elif message.voice_activity_detection_signal is not None:
            signal = message.voice_activity_detection_signal.vad_signal_type
            self._publish("voice_activity", {"signal": wire.voice_signal(signal)})
        elif message.voice_activity is not None:
            activity = message.voice_activity
            payload: dict[str, Any] = {"signal": wire.voice_signal(activity.voice_activity_type)}
            if activity.audio_offset is not None:
                payload["audio_offset_ms"] = wire.duration_ms(activity.audio_offset)
            self._publish("voice_activity", payload)
        if message.usage_metadata is not None and self.state != "closed":
            usage = msgspec.structs.asdict(message.usage_metadata)
            self._publish("usage", {k: v for k, v in usage.items() if v is not None})

    def _content(self, content: wire.ServerContent) -> None:
        if content.model_turn is not None:
            for i, part in enumerate(content.model_turn.parts):
                self._part(part, i)
                if self.state == "closed":
                    return
        if content.input_transcription is not None:
            self._publish("input_transcription", _transcription(content.input_transcription))
        if content.output_transcription is not None:
            self._publish("output_transcription", _transcription(content.output_transcription))
        if content.interrupted:
            purged = self.topic.stream.discard_pending(_is_audio)
            self._publish("interrupted", {"purged_audio": purged})
            self.generation_epoch += 1
            self.info.generation_epoch = self.generation_epoch
        if content.generation_complete:
            self._publish("generation_complete", {})
        if content.turn_complete:
            payload: dict[str, Any] = {"reason": content.turn_complete_reason}
            if content.waiting_for_input is not None:
                payload["waiting_for_input"] = content.waiting_for_input
            if content.grounding_metadata is not None:
                payload["grounding"] = content.grounding_metadata
            self._publish("turn_complete", payload)
            self.turn_epoch += 1
            self.info.turn_epoch = self.turn_epoch

    def _part(self, part: wire.ServerPart, index: int) -> None:
        if part.text is not None:
            self._publish("thought" if part.thought else "text", {"text": part.text})
        elif part.inline_data is not None:
            path = f"$.serverContent.modelTurn.parts[{index}].inlineData.data"
            try:
                data = wire.decode_b64(part.inline_data.data, path)
            except wire.LiveProtocolError as exc:
                self._end("protocol_error", f"{exc.reason} at {exc.path}")
                return
            self._publish("audio", {"mime_type": part.inline_data.mime_type, "data": data})
            _count_media("out", "audio", len(data))
        elif part.executable_code is not None:
            code = part.executable_code
            self._publish("code", {"language": code.language, "code": code.code})
        elif part.code_execution_result is not None:
            res = part.code_execution_result
            self._publish("code", {"outcome": res.outcome, "output": res.output})

    def _tool_call(self, call: wire.ToolCall) -> None:
        runner = self.runner
        calls = []
        for fc in call.function_calls:
            managed = runner is not None and runner.manages(fc.name) and bool(fc.id)
            calls.append({"id": fc.id, "name": fc.name, "args": fc.args, "managed": managed})
            telemetry.count("phloem.live.tool_calls", managed=managed)
        self._publish("tool_call", {"calls": calls})
        if runner is None:
            return
        for fc in call.function_calls:
            if fc.id and runner.manages(fc.name):
                runner.submit(self.link_id, fc)

    def _answer_tool(self, done: ToolDone) -> None:
        frame = wire.encode_client(
            wire.tool_response([wire.FunctionResponse(done.id, done.name, done.response)])
        )
        self.outbox.admit([frame], urgent=True)
        self._publish("tool_result", {"id": done.id, "name": done.name, "response": done.response})

    # -- events --------------------------------------------------------------------------

    def _publish(self, kind: str, payload: dict[str, Any]) -> None:
        self.sequence += 1
        event = LiveEvent(
            kind=kind,
            payload=payload,
            sequence=self.sequence,
            turn_epoch=self.turn_epoch,
            generation_epoch=self.generation_epoch,
            timestamp=time.time(),
        )
        try:
            self.topic.publish(event)
        except PhloemError:
            pass  # the topic closed (owner gone): the session is ending

    # -- client requests -----------------------------------------------------------------

    def _request(self, forward: Forward) -> None:
        call, request = forward.call, forward.request
        try:
            if isinstance(request, LiveStatus):
                call.reply(self.status())
            elif isinstance(request, LiveSend):
                call.reply(self._send(request))
        except PhloemError as err:
            call.fail(err)
        except Exception as exc:  # answered, then the session ends (`on_failure`)
            what = type(exc).__name__
            call.fail(PhloemError(ErrorKind.ACTOR_ERROR, f"the Live session failed ({what})"))
            raise

    def status(self) -> dict[str, Any]:
        messages, nbytes = self.outbox.counts()
        return {
            "state": self.state,
            "model": self.spec.options.setup.model,
            "reconnects": self.reconnects,
            "subscribers": self.topic.stream.subscriber_count(),
            "queued": {"messages": messages, "bytes": nbytes},
            "dropped_inputs": self.dropped_inputs,
            "turn_epoch": self.turn_epoch,
            "generation_epoch": self.generation_epoch,
            "sequence": self.sequence,
            "resumable": self.handle is not None,
            "tool_calls_in_flight": self.runner.in_flight() if self.runner is not None else 0,
            "close_reason": self.close_reason,
        }

    def _send(self, send: LiveSend) -> LiveSent:
        if self.state == "closed":
            raise PhloemError(ErrorKind.LIVE_SESSION_CLOSED, "the Live session has closed")
        if self.state != "active":
            raise PhloemError(ErrorKind.NOT_READY, f"the Live session is {self.state}")
        data, control = self._frames(send)
        if not data and not control:
            raise PhloemError(ErrorKind.INVALID_LIVE_INPUT, "nothing to send")
        if data and not self.outbox.admit(data):
            m, b = self.outbox.counts()
            raise PhloemError(
                ErrorKind.INGRESS_BACKPRESSURE,
                f"input queue full: {m} frames, {b} bytes queued (max "
                f"{self.cfg.max_ingress_messages} frames, {self.cfg.max_ingress_bytes} bytes)",
            )
        if control:
            self.outbox.admit(control, urgent=True)
        messages, nbytes = self.outbox.counts()
        return LiveSent(len(data) + len(control), messages, nbytes)

    def _frames(self, send: LiveSend) -> tuple[list[bytes], list[bytes]]:
        """The input frames (queued in order) and control frames (jumping the queue)."""
        manual = self.spec.options.manual_activity
        data: list[wire.ClientMessage] = []
        control: list[wire.ClientMessage] = []
        try:
            if send.tool_responses:
                if len(send.tool_responses) > wire.MAX_FUNCTION_CALLS:
                    raise wire.LiveProtocolError("$.toolResponse", "too many responses")
                for r in send.tool_responses:
                    if self.runner is not None and self.runner.is_inflight(r.id):
                        raise PhloemError(
                            ErrorKind.TOOL_CALL_MANAGED_BY_EXECUTOR,
                            f"tool call {r.id[:64]!r} is answered by phloem itself",
                        )
                responses = [
                    wire.FunctionResponse(r.id, r.name, r.response) for r in send.tool_responses
                ]
                control.append(wire.tool_response(responses))
            if send.activity == "start":
                if not manual:
                    raise wire.LiveProtocolError("$.realtimeInput.activityStart", _AUTO)
                control.append(wire.activity_input("start"))
            if send.text is not None:
                data.append(wire.text_input(send.text))
            if send.audio is not None:
                data.append(wire.audio_input(send.audio))
                _count_media("in", "audio", len(send.audio))
            if send.video is not None:
                data.append(wire.video_input(send.video, send.video_mime))
                _count_media("in", "video", len(send.video))
            if send.activity == "end":
                if not manual:
                    raise wire.LiveProtocolError("$.realtimeInput.activityEnd", _AUTO)
                data.append(wire.activity_input("end"))
            if send.audio_stream_end:
                if manual:
                    raise wire.LiveProtocolError(
                        "$.realtimeInput.audioStreamEnd", "only with automatic activity detection"
                    )
                data.append(wire.audio_stream_end())
        except wire.LiveProtocolError as exc:
            raise PhloemError(ErrorKind.INVALID_LIVE_INPUT, f"{exc.reason} at {exc.path}") from None
        return [wire.encode_client(m) for m in data], [wire.encode_client(m) for m in control]


_AUTO = "only with automatic_activity_detection = false"
