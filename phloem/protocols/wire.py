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
One exception: a request nested more than `MAX_NESTING_DEPTH` (128) levels deep, its body
included (`phloem.protocols.depth`, checked before decoding), is refused for its own id alone
(`Fail(id, bad_message)`, `BadRequest`) when that id can be read cheaply — it comes
before any nested value in the request's map, as every encoder of these structs writes
it (`t`, `id`, then the rest). Otherwise the id cannot be read without walking the
nesting, a `Fail` without an id is by protocol about the whole connection, and so it is
a `bad_frame` that closes the connection.
"""

from __future__ import annotations

import struct
from typing import Any

import msgspec

from phloem.protocols import framing
from phloem.protocols.depth import MAX_NESTING_DEPTH, NestingTooDeep, check_msgpack_depth
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.limits import check_range

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


class TraceContext(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The caller's W3C trace context (`phloem.base.telemetry.carrier()`): the daemon's spans
    for the request become children of the caller's span. It is advisory: a malformed or
    over-long value (traceparent ≠ 55 chars, tracestate > 512) is ignored, never an error
    (the frame itself is bounded by `max_frame_bytes`)."""

    traceparent: str
    tracestate: str = ""

    @classmethod
    def from_carrier(cls, data: dict[str, str] | None) -> TraceContext | None:
        """The envelope field for a W3C carrier (None: no context to send)."""
        if not data or len(data.get("traceparent", "")) != 55:
            return None
        state = data.get("tracestate", "")
        return cls(data["traceparent"], state if len(state) <= 512 else "")

    def carrier(self) -> dict[str, str]:
        out = {"traceparent": self.traceparent}
        if self.tracestate:
            out["tracestate"] = self.tracestate
        return out


class Ask(_Msg, tag="ask", frozen=True, omit_defaults=True):
    """Ask an actor (by path) and wait for its reply; `timeout` in seconds."""

    id: RequestId
    actor: str
    body: msgspec.Raw
    timeout: float | None = None
    trace: TraceContext | None = None


class Tell(_Msg, tag="tell", frozen=True, omit_defaults=True):
    """Queue a message for an actor; the reply is an empty `Reply` once it is queued."""

    id: RequestId
    actor: str
    body: msgspec.Raw
    trace: TraceContext | None = None


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


CHILD_ACTIONS = ("start", "stop", "restart")
"""What `ControlChild` does to a supervisor's child (supervisorctl's words)."""
CHILD_OP = "_child"
"""A client transport's op for a `ControlChild` is its action and this (`stop_child`)."""


class ControlChild(_Msg, tag="child", frozen=True, omit_defaults=True):
    """Start, stop or restart (`action`, one of `CHILD_ACTIONS`) the supervisor's child at
    tree path `path` (as `phloem tree` prints it); the reply is a `ChildControlled`.
    `timeout`: seconds to wait for its supervisor (default: `request_timeout_s`)."""

    id: RequestId
    action: str
    path: str
    timeout: float | None = None


class GetLogs(_Msg, tag="logs", frozen=True, omit_defaults=True):
    """The daemon's kept log lines of `path` and below it (every line for ""), made at or
    after `since` (seconds since the epoch); with `follow`, also a stream of later ones.
    The reply is a `phloem.protocols.logs.LogsReply`."""

    id: RequestId
    path: str = ""
    since: float | None = None
    follow: bool = False


ClientMessage = (
    Hello
    | Ask
    | Tell
    | GetStatus
    | GetTree
    | Subscribe
    | Credit
    | Unsubscribe
    | StopDaemon
    | Ping
    | ControlChild
    | GetLogs
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


TOO_DEEP = "nested too deeply to decode"
MAX_SERVER_FRAME_DEPTH = 2 * MAX_NESTING_DEPTH
"""Deepest daemon frame a client decodes: a reply or event wraps what a request carried
(at most `MAX_NESTING_DEPTH` deep) in a few levels of its own, so it may nest deeper."""


class BadRequest(PhloemError):
    """A request the daemon refuses for its own id only: the connection stays open."""

    def __init__(self, kind: str, message: str, request_id: RequestId) -> None:
        super().__init__(kind, message)
        self.request_id = request_id


def decode_client(frame: bytes | memoryview) -> Any:
    """Decode a client frame body; `PhloemError(bad_frame)` with msgspec's reason, or
    `BadRequest(bad_message)` for a request nested too deeply whose id comes first."""
    try:
        check_msgpack_depth(frame, MAX_NESTING_DEPTH)
        return client_decoder.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PhloemError(ErrorKind.BAD_FRAME, f"undecodable frame: {exc}") from exc
    except (NestingTooDeep, RecursionError):
        why = f"{TOO_DEEP} (more than {MAX_NESTING_DEPTH} levels)"
        rid = request_id_of(frame)
        if rid is None:
            raise PhloemError(
                ErrorKind.BAD_FRAME, f"undecodable frame: {why}, its id unreadable"
            ) from None
        raise BadRequest(ErrorKind.BAD_MESSAGE, f"request {why}", rid) from None
    except Exception as exc:  # never expected from msgspec; still this frame's fault only
        raise PhloemError(ErrorKind.BAD_FRAME, f"undecodable frame: {type(exc).__name__}") from None


def decode_server(frame: bytes | memoryview) -> Any:
    """Decode a daemon frame body; `PhloemError(bad_frame)` for anything undecodable or
    nested more than `MAX_SERVER_FRAME_DEPTH` levels."""
    try:
        check_msgpack_depth(frame, MAX_SERVER_FRAME_DEPTH)
        return server_decoder.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PhloemError(ErrorKind.BAD_FRAME, f"undecodable frame from daemon: {exc}") from exc
    except (NestingTooDeep, RecursionError):
        raise PhloemError(
            ErrorKind.BAD_FRAME,
            f"undecodable frame from daemon: {TOO_DEEP} (more than {MAX_SERVER_FRAME_DEPTH})",
        ) from None
    except Exception as exc:  # never expected from msgspec; still a typed error
        raise PhloemError(
            ErrorKind.BAD_FRAME, f"undecodable frame from daemon: {type(exc).__name__}"
        ) from None


# msgpack scalars by first byte: how many bytes follow the type byte, directly (`_FIXED`)
# or as a big-endian length of that many bytes (`_SIZED`: str, bin, ext; ext adds a type
# byte). Containers and the unused 0xc1 are in neither: the scan stops there.
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED |= {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1)}
_SIZED |= {0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0)}
_UINTS = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i"}
_UINTS |= {0xD3: ">q"}
MAX_ID_SCAN_FIELDS = 16  # map entries looked at before giving up on the id


def request_id_of(frame: bytes | memoryview) -> RequestId | None:
    """The `id` of a request frame read without decoding it: the frame must be a msgpack
    map whose `id` (an int) comes before any array or map value. None otherwise.

    Walks scalars only (at most `MAX_ID_SCAN_FIELDS` entries), so it costs the same
    however deep the rest of the frame is nested; never raises.
    """
    data = bytes(frame[: 64 * 1024]) if isinstance(frame, memoryview) else frame
    try:
        return _scan_for_id(data)
    except (IndexError, struct.error):
        return None


def _scan_for_id(data: bytes) -> RequestId | None:
    first = data[0]
    if 0x80 <= first <= 0x8F:
        count, pos = first & 0x0F, 1
    elif first == 0xDE:
        count, pos = struct.unpack_from(">H", data, 1)[0], 3
    elif first == 0xDF:
        count, pos = struct.unpack_from(">I", data, 1)[0], 5
    else:
        return None
    for _ in range(min(count, MAX_ID_SCAN_FIELDS)):
        key, pos = _scalar(data, pos)
        if key is None:
            return None
        kind = data[pos]
        if key == b"id":
            if kind <= 0x7F:
                return kind
            if kind >= 0xE0:
                return kind - 0x100
            fmt = _UINTS.get(kind)
            return None if fmt is None else int(struct.unpack_from(fmt, data, pos + 1)[0])
        _, pos = _scalar(data, pos)
        if pos < 0:
            return None
    return None


def _scalar(data: bytes, pos: int) -> tuple[bytes | None, int]:
    """`(the bytes of a str, or None, the position after it)` for the scalar at `pos`;
    `(None, -1)` for a container or an invalid byte."""
    kind = data[pos]
    if kind <= 0x7F or kind >= 0xE0:
        return None, pos + 1
    if 0xA0 <= kind <= 0xBF:
        end = pos + 1 + (kind & 0x1F)
        return data[pos + 1 : end], end
    if kind in _FIXED:
        return None, pos + 1 + _FIXED[kind]
    if kind in _SIZED:
        width, extra = _SIZED[kind]
        size = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        start = pos + 1 + width + extra
        if start + size > len(data):
            raise IndexError("truncated")
        return (data[start : start + size] if kind >= 0xD9 else None), start + size
    return None, -1


# --- replies with a fixed shape -----------------------------------------------------------


class TelemetryCounts(msgspec.Struct, frozen=True):
    """The export bus's counts (`phloem status`, key `telemetry`); zeros when it is off."""

    enabled: bool = False
    exported: int = 0
    dropped: int = 0
    failed: int = 0
    dropped_by_reason: dict[str, int] = msgspec.field(default_factory=dict)
    offered: int = 0  # == exported + dropped + queued + inflight
    queued: int = 0
    inflight: int = 0
    peak_queued: int = 0


class ClusterSummary(msgspec.Struct, frozen=True):
    """Where process children run (`phloem status`, key `cluster`): `local`, or a Ray
    cluster's address, live nodes, CPUs (all and free) and remote calls in flight."""

    backend: str = "local"
    address: str = ""
    connected: bool = False
    nodes: int = 0
    cpus: float = 0.0
    cpus_available: float = 0.0
    in_flight: int = 0


class ChildControlled(msgspec.Struct, frozen=True):
    """What `ControlChild` did: the child's `state` after it (`stopped`, `running`, or
    `removed` for a dynamic or temporary child, whose spec goes when it stops), and the
    handle ids and pids of the incarnation before (`previous`) and after (`handle`)."""

    path: str
    action: str
    state: str
    handle: str | None = None
    pid: int | None = None
    previous: str | None = None
    previous_pid: int | None = None


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
    telemetry: TelemetryCounts = msgspec.field(default_factory=TelemetryCounts)
    cluster: ClusterSummary = msgspec.field(default_factory=ClusterSummary)
    stopped: list[str] = msgspec.field(default_factory=list)  # children stopped by hand
