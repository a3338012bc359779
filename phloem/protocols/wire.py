"""The client wire protocol: length-prefixed msgpack frames of tagged msgspec structs.

A frame is a 4-byte big-endian length followed by that many bytes of msgpack: one
message of `ClientMessage` (client → daemon) or `ServerMessage` (daemon → client), told
apart by the tag field `t`. Payloads addressed to actors (`Ask.body`, `Reply.body`,
`Event.body`) are nested msgpack kept raw (`msgspec.Raw`), so the daemon decodes them
only once, against the receiving service's own request type.

Conversation:
1. The client sends `Hello(version)`; the daemon answers `Welcome` or
   `Fail(unsupported_version)` and closes.
2. Requests carry a client-chosen `id`; each gets exactly one `Reply` or `Fail` with that
   id. Requests may be pipelined; replies come in completion order.
3. `Subscribe` opens a stream under credit (`window_messages`, `window_bytes`); events
   arrive as `Event(sub, body)`; the client returns credit with `Credit(sub, messages,
   bytes)`; the end comes as `StreamEnd(sub, kind, detail)`.

A frame that cannot be decoded, or longer than the maximum frame size, gets one
`Fail(id=None, ...)` (`bad_frame`, `frame_too_large`) and closes that connection only.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.limits import check_range
from phloem.protocols import framing
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS = frozenset({PROTOCOL_VERSION})
HEADER = framing.HEADER
HEADER_BYTES = framing.HEADER_BYTES
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_FRAME_BYTES_LIMIT = 64 * 1024 * 1024
MAX_ACTOR_PATH_CHARS = 512
MAX_STREAM_NAME_CHARS = 512
MAX_REQUEST_ID = 2**63 - 1


class _Msg(msgspec.Struct, frozen=True, tag_field="t", forbid_unknown_fields=True):
    pass


# --- client → daemon --------------------------------------------------------------------

RequestId = int


class Hello(_Msg, tag="hello", frozen=True):
    version: int
    client: str = ""


class Ask(_Msg, tag="ask", frozen=True):
    """Ask an actor (by path) and wait for its reply; `timeout` in seconds."""

    id: RequestId
    actor: str
    body: msgspec.Raw
    timeout: float | None = None


class Tell(_Msg, tag="tell", frozen=True):
    """Queue a message for an actor; the reply is an empty `Reply` once it is queued."""

    id: RequestId
    actor: str
    body: msgspec.Raw


class GetStatus(_Msg, tag="status", frozen=True):
    id: RequestId


class GetTree(_Msg, tag="tree", frozen=True):
    id: RequestId


class Subscribe(_Msg, tag="subscribe", frozen=True):
    id: RequestId
    stream: str
    window_messages: int
    window_bytes: int


class Credit(_Msg, tag="credit", frozen=True):
    """Return credit for a subscription (no reply)."""

    sub: int
    messages: int
    bytes: int


class Unsubscribe(_Msg, tag="unsubscribe", frozen=True):
    id: RequestId
    sub: int


class StopDaemon(_Msg, tag="stop", frozen=True):
    id: RequestId


class Ping(_Msg, tag="ping", frozen=True):
    id: RequestId


ClientMessage = (
    Hello | Ask | Tell | GetStatus | GetTree | Subscribe | Credit | Unsubscribe | StopDaemon | Ping
)

# --- daemon → client --------------------------------------------------------------------


class Welcome(_Msg, tag="welcome", frozen=True):
    version: int
    server: str
    pid: int
    max_frame_bytes: int
    request_timeout_s: float = 30.0
    # The daemon's `max_inflight_per_connection` (None from daemons that predate it): a
    # pipelining client keeps at most this many asks and tells outstanding.
    max_inflight: int | None = None


class Reply(_Msg, tag="reply", frozen=True):
    id: RequestId
    body: msgspec.Raw


class Fail(_Msg, tag="fail", frozen=True):
    """An error for request `id`, or for the connection itself when `id` is None."""

    id: RequestId | None
    error: ErrorValue


class Event(_Msg, tag="event", frozen=True):
    sub: int
    body: msgspec.Raw


class StreamEnd(_Msg, tag="end", frozen=True):
    """A subscription ended: `kind` is an exit kind (`normal`, `backpressure`, ...)."""

    sub: int
    kind: str
    detail: str | None = None


ServerMessage = Welcome | Reply | Fail | Event | StreamEnd

# --- framing ----------------------------------------------------------------------------

_encoder = msgspec.msgpack.Encoder()
client_decoder = msgspec.msgpack.Decoder(ClientMessage)
server_decoder = msgspec.msgpack.Decoder(ServerMessage)

NIL = msgspec.Raw(b"\xc0")  # msgpack nil: the body of an empty reply


def encode_body(value: Any) -> msgspec.Raw:
    """Encode an actor payload as raw msgpack for an `Ask`/`Reply`/`Event` body."""
    return msgspec.Raw(_encoder.encode(value))


def encode_frame(message: _Msg) -> bytes:
    """Header + msgpack of one message (see `phloem.protocols.framing`)."""
    return framing.frame(_encoder.encode(message))


def error_frame(kind: str, message: str, request_id: RequestId | None = None) -> bytes:
    return encode_frame(Fail(request_id, ErrorValue(kind=kind, message=message)))


class FrameReader(framing.FrameDecoder):
    """Splits the client stream into frame bodies; refuses frames over `max_frame_bytes`.

    A `framing.FrameDecoder` with the wire's default and bounds for the limit: `feed`
    returns the complete bodies; a header announcing more than `max_frame_bytes` raises
    `frame_too_large` (a `PhloemError`), after the frames before it have been returned
    (the error is then raised by the next call, or by `check`).
    """

    __slots__ = ()

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        super().__init__(check_range("max_frame_bytes", max_frame_bytes, 1, MAX_FRAME_BYTES_LIMIT))


def decode_client(frame: bytes) -> Any:
    """Decode a client frame body; `PhloemError(bad_frame)` with msgspec's reason."""
    try:
        return client_decoder.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PhloemError(ErrorKind.BAD_FRAME, f"undecodable frame: {exc}") from exc


def decode_server(frame: bytes) -> Any:
    try:
        return server_decoder.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PhloemError(ErrorKind.BAD_FRAME, f"undecodable frame from daemon: {exc}") from exc


# --- replies with a fixed shape -----------------------------------------------------------


class DaemonStatus(msgspec.Struct, frozen=True):
    """The one-screen summary behind `phloem status` (and `Client.status()`)."""

    version: str
    pid: int
    started_at: float
    uptime_s: float
    state: str
    services: list[str]
    actors: int
    processes: int
    supervisors: int
    restarts: int
    rss_bytes: int
    children_rss_bytes: int
    threads: int
    connections: int
    refs: int
    streams: int
    socket: str | None = None
