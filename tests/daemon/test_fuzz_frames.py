"""Malformed frames: each gets an error frame, closes only its connection, and the daemon
keeps serving everyone else. Also the timing limits (handshake, partial frame) and the
per-connection in-flight limit, at their edges."""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import phloem
from phloem.protocols.depth import MAX_NESTING_DEPTH
from phloem.protocols.errors import PhloemError
from phloem.protocols.wire import (
    Ask,
    BadRequest,
    Credit,
    Fail,
    FrameReader,
    Hello,
    Ping,
    Reply,
    Subscribe,
    Tell,
    Welcome,
    decode_client,
    decode_server,
    encode_body,
    encode_frame,
    request_id_of,
)
from tests.helpers import DaemonProc, running_daemon

MAX_FRAME = 64 * 1024
CONFIG = f"""
[daemon]
max_frame_bytes = {MAX_FRAME}
handshake_timeout_s = 0.5
frame_timeout_s = 0.5
max_inflight_per_connection = 2
max_outbox_bytes = 65536
"""
ERROR_KINDS = {"bad_frame", "frame_too_large", "unsupported_version", "timeout"}

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def fuzz_daemon() -> Iterator[DaemonProc]:
    with running_daemon(CONFIG, "fuzz.sock") as daemon:
        yield daemon


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    return sock


def _read_all(sock: socket.socket) -> list[object]:
    """Every frame until the daemon closes the connection."""
    reader = FrameReader(MAX_FRAME)
    frames: list[bytes] = []
    while True:
        data = sock.recv(65536)
        if not data:
            return [decode_server(f) for f in frames]
        frames.extend(reader.feed(data))


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


_tags = st.sampled_from(["hello", "ask", "tell", "subscribe", "credit", "status", "nope", ""])
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.lists(st.integers(-1000, 1000), max_size=3),
)
# Maps with a tag but fields of the wrong types (never a valid message: "id" is a string).
_wrong_types = st.builds(
    lambda tag, extra: msgspec.msgpack.encode({"t": tag, "id": "one", **extra}),
    _tags,
    st.dictionaries(st.sampled_from(["actor", "body", "sub", "version", "x"]), _values, max_size=3),
)
_fuzz = st.one_of(
    st.tuples(st.just("random"), st.binary(min_size=1, max_size=300).map(_frame)),
    st.tuples(st.just("wrong_types"), _wrong_types.map(_frame)),
    st.tuples(
        st.just("truncated"),
        st.binary(min_size=2, max_size=300).map(lambda b: _frame(b)[: 4 + len(b) // 2]),
    ),
    st.tuples(
        st.just("oversized"),
        st.integers(MAX_FRAME + 1, 2**32 - 1).map(lambda n: struct.pack(">I", n) + b"\x00" * 8),
    ),
    st.tuples(st.just("raw_bytes"), st.binary(min_size=1, max_size=64)),
)


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_fuzz, with_hello=st.booleans())
def test_every_malformed_frame_gets_an_error_and_the_daemon_keeps_serving(
    fuzz_daemon: DaemonProc, case: tuple[str, bytes], with_hello: bool
) -> None:
    _, payload = case
    sock = _connect(fuzz_daemon.socket)
    try:
        if with_hello:
            sock.sendall(encode_frame(Hello(version=1)))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)  # a frame left incomplete is then truncated
        frames = _read_all(sock)
    finally:
        sock.close()
    if with_hello:
        assert isinstance(frames[0], Welcome)
        frames = frames[1:]
    assert len(frames) == 1, frames
    (fail,) = frames
    assert isinstance(fail, Fail) and fail.id is None
    assert fail.error.kind in ERROR_KINDS, fail.error


def test_the_daemon_survived_the_fuzzing_and_still_answers(fuzz_daemon: DaemonProc) -> None:
    with phloem.Client.connect(fuzz_daemon.socket) as client:
        assert client.ask("echo", "alive") == "alive"
        assert client.status().connections == 1


def _ask_of_size(total: int) -> bytes:
    """An echo ask whose frame body is exactly `total` bytes."""
    n = total - 64
    while len(frame := encode_frame(Ask(1, "echo", encode_body(b"x" * n), 5))) - 4 < total:
        n += 1
    assert len(frame) - 4 == total
    return frame


def test_a_frame_of_exactly_max_frame_bytes_is_served_and_one_more_byte_is_refused(
    fuzz_daemon: DaemonProc,
) -> None:
    sock = _connect(fuzz_daemon.socket)
    sock.sendall(encode_frame(Hello(version=1)) + _ask_of_size(MAX_FRAME))
    sock.shutdown(socket.SHUT_WR)
    welcome, reply = _read_all(sock)
    sock.close()
    assert isinstance(welcome, Welcome)
    assert isinstance(reply, Reply) and reply.id == 1
    assert len(msgspec.msgpack.decode(reply.body)) > MAX_FRAME - 100

    sock = _connect(fuzz_daemon.socket)
    sock.sendall(encode_frame(Hello(version=1)) + _ask_of_size(MAX_FRAME + 1))
    welcome, fail = _read_all(sock)
    sock.close()
    assert isinstance(welcome, Welcome)
    assert isinstance(fail, Fail) and fail.id is None
    assert fail.error.kind == "frame_too_large"
    assert str(MAX_FRAME + 1) in fail.error.message


def test_a_connection_that_never_says_hello_is_closed_after_the_handshake_timeout(
    fuzz_daemon: DaemonProc,
) -> None:
    sock = _connect(fuzz_daemon.socket)
    start = time.monotonic()
    (fail,) = _read_all(sock)
    assert isinstance(fail, Fail) and fail.error.kind == "timeout"
    assert "hello" in fail.error.message
    assert time.monotonic() - start < 5
    sock.close()


def test_a_frame_left_half_sent_times_out(fuzz_daemon: DaemonProc) -> None:
    sock = _connect(fuzz_daemon.socket)
    sock.sendall(encode_frame(Hello(version=1)) + struct.pack(">I", 100) + b"abc")
    welcome, fail = _read_all(sock)
    assert isinstance(welcome, Welcome)
    assert isinstance(fail, Fail) and fail.error.kind == "timeout"
    sock.close()


def test_requests_beyond_the_in_flight_limit_get_backpressure(fuzz_daemon: DaemonProc) -> None:
    sock = _connect(fuzz_daemon.socket)
    sock.sendall(encode_frame(Hello(version=1)))
    asks = [
        encode_frame(Ask(id=i, actor="echo", body=encode_body({"sleep": 0.3}), timeout=5))
        for i in (1, 2, 3)
    ]
    sock.sendall(b"".join(asks))
    reader = FrameReader(MAX_FRAME)
    frames: list[object] = []
    while len(frames) < 4:
        frames.extend(decode_server(f) for f in reader.feed(sock.recv(65536)))
    sock.close()
    fails = [f for f in frames if isinstance(f, Fail)]
    replies = [f for f in frames if isinstance(f, Reply)]
    assert [(f.id, f.error.kind) for f in fails] == [(3, "backpressure")]
    assert sorted(r.id for r in replies) == [1, 2]


def test_a_client_that_stops_reading_is_dropped_when_its_outbox_passes_the_limit(
    fuzz_daemon: DaemonProc,
) -> None:
    from phloem.protocols.credit import CreditWindow
    from phloem.protocols.errors import PhloemError

    client = phloem.Client.connect(fuzz_daemon.socket)
    name = client.ask("echo", {"stream": "outbox", "count": 60_000, "mode": "publish"})
    # A window far larger than the socket buffer plus the 64 KiB outbox, never read. On a
    # busy machine the daemon outruns even the reads of the subscribe's own round trip:
    # then the drop comes before its answer, which is the same edge.
    full_seen = False
    with pytest.raises(PhloemError) as err:
        client.subscribe(name["stream"], CreditWindow(60_000, 1 << 30))
        fuzz_daemon.wait_event("connection_outbox_full")
        full_seen = True
        for _ in range(100):
            client.ping(timeout=5)
    assert err.value.kind in ("connection_lost", "bad_frame")
    if not full_seen:
        fuzz_daemon.wait_event("connection_outbox_full")
    client.close()
    with phloem.Client.connect(fuzz_daemon.socket) as other:
        other.ping()


def _next_of(sock: socket.socket, reader: FrameReader, kind: type, rid: int) -> object:
    """Read frames until one of type `kind` for request `rid` (skipping events)."""
    while True:
        data = sock.recv(65536)
        assert data, "the daemon closed the connection"
        for body in reader.feed(data):
            message = decode_server(body)
            if isinstance(message, kind) and getattr(message, "id", None) == rid:
                return message


def test_negative_credit_is_a_bad_frame(fuzz_daemon: DaemonProc) -> None:
    sock = _connect(fuzz_daemon.socket)
    reader = FrameReader(MAX_FRAME)
    try:
        # two events and a window of one: the stream stays open, waiting for credit
        request = {"stream": "credit", "count": 2, "wait_s": 5}
        sock.sendall(
            encode_frame(Hello(version=1)) + encode_frame(Ask(1, "echo", encode_body(request), 5))
        )
        opened = _next_of(sock, reader, Reply, 1)
        assert isinstance(opened, Reply)
        stream = msgspec.msgpack.decode(opened.body)["stream"]
        sock.sendall(encode_frame(Subscribe(2, stream, 1, 65536)))
        subscribed = _next_of(sock, reader, Reply, 2)
        assert isinstance(subscribed, Reply)
        sub = msgspec.msgpack.decode(subscribed.body)
        sock.sendall(encode_frame(Credit(sub, -1, 0)))
        fail = _next_of(sock, reader, Fail, None)
    finally:
        sock.close()
    assert isinstance(fail, Fail)
    assert (fail.error.kind, fail.error.message) == (
        "bad_frame",
        "credit messages must be at least 0",
    )


def test_a_bad_subscribe_window_is_a_bad_message_that_names_the_limit(
    fuzz_daemon: DaemonProc,
) -> None:
    sock = _connect(fuzz_daemon.socket)
    reader = FrameReader(MAX_FRAME)
    try:
        sock.sendall(encode_frame(Hello(version=1)) + encode_frame(Subscribe(1, "any", 0, 65536)))
        fail = _next_of(sock, reader, Fail, 1)
    finally:
        sock.close()
    assert isinstance(fail, Fail)
    assert fail.error.kind == "bad_message"
    assert fail.error.message.startswith("window messages must be between 1 and ")


# --- in process: 10,000 generated frame bodies through the codec the daemon uses -----------

CODEC_CASES = 10_000


def _deep_msgpack(rng: random.Random) -> bytes:
    depth = rng.choice([MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1, 5_000])
    header = rng.choice([b"\x91", b"\x81\xa1k", b"\xdc\x00\x01", b"\xdf\x00\x00\x00\x01\xa1k"])
    return header * depth + rng.choice([b"\xc0", b"\x90", b"\x80", b"\x01"])


def _frame_body(rng: random.Random) -> bytes:
    """One frame body of some hostile kind (the daemon's `decode_client` input)."""
    kind = rng.randrange(9)
    if kind == 0:  # a valid request
        message = rng.choice(
            [Ask(rng.randrange(2**32), "echo", encode_body("x"), 5.0), Hello(1), Ping(1)]
        )
        return encode_frame(message)[4:]
    if kind == 1:  # a request whose body nests around the limit, or far past it
        rid = rng.randrange(-(2**63), 2**63)
        body = msgspec.Raw(_deep_msgpack(rng))
        return encode_frame(rng.choice([Ask(rid, "echo", body, 5.0), Tell(rid, "echo", body)]))[4:]
    if kind == 2:  # the nesting before the id: no id to answer
        return msgspec.msgpack.encode(
            {"t": "ask", "body": msgspec.Raw(_deep_msgpack(rng)), "id": 1}
        )
    if kind == 3:  # a valid frame with bytes changed
        data = bytearray(encode_frame(Ask(5, "echo", encode_body({"a": [1, 2]}), 1.0))[4:])
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if kind == 4:  # containers and strings claiming more than there is
        return rng.choice([b"\xdd", b"\xdf", b"\xdb", b"\xc6", b"\xc9"]) + b"\xff" * rng.randint(
            0, 8
        )
    if kind == 5:  # wrong types in a tagged map
        fields = {"t": rng.choice(["ask", "tell", "subscribe", "credit", "x"]), "id": "one"}
        fields[rng.choice(["actor", "body", "sub", "timeout"])] = rng.choice(
            [None, -1, 2**64 - 1, 1e308, "", b"\x00", [], {}]
        )
        return msgspec.msgpack.encode(fields)
    if kind == 6:  # huge and odd scalars
        return msgspec.msgpack.encode(
            {"t": "ask", "id": 1, "actor": "a" * rng.randint(0, 5_000), "body": "\ud7ff" * 9}
        )
    if kind == 7:  # wide, shallow and big
        return encode_frame(Ask(1, "echo", encode_body([[0]] * rng.randint(0, 2_000)), 1.0))[4:]
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))


def test_ten_thousand_generated_frames_decode_or_fail_typed_in_process() -> None:
    """`decode_client` (the daemon's) and `decode_server` (the client's) on every body:
    a message, a `BadRequest` for the request's own id, or a `bad_frame` — never
    anything else; `request_id_of` never raises."""
    rng = random.Random(1)
    outcomes: dict[str, int] = {}
    started = time.monotonic()
    for _ in range(CODEC_CASES):
        body = _frame_body(rng)
        assert request_id_of(body) is None or isinstance(request_id_of(body), int)
        try:
            decode_client(body)
            outcome = "decoded"
        except BadRequest as bad:
            assert bad.kind == "bad_message" and isinstance(bad.request_id, int)
            outcome = "bad_message"
        except PhloemError as exc:
            assert exc.kind == "bad_frame", exc
            outcome = "bad_frame"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        try:
            decode_server(body)
        except PhloemError as exc:
            assert exc.kind == "bad_frame", exc
        reader = FrameReader(MAX_FRAME)
        try:
            reader.feed(_frame(body)[: rng.randint(0, len(body) + 4)])
        except PhloemError as exc:
            assert exc.kind == "frame_too_large", exc
    took = time.monotonic() - started
    print(f"frames fuzzed in process: {CODEC_CASES} in {took:.1f} s, outcomes {outcomes}")
    assert all(outcomes.get(k, 0) > 200 for k in ("decoded", "bad_message", "bad_frame"))
