"""Deeply nested msgpack in requests: each such request gets `bad_message` for its own id,
the connection and the requests pipelined with it live on, and the daemon logs the event
once per connection (with a count), never a traceback."""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Iterator

import msgspec
import pytest

import phloem
from phloem.protocols.depth import MAX_NESTING_DEPTH
from phloem.protocols.wire import (
    Ask,
    Fail,
    FrameReader,
    Hello,
    Ping,
    Reply,
    Tell,
    Welcome,
    decode_server,
    encode_body,
    encode_frame,
)
from tests.helpers import DaemonProc, short_tmpdir, wait_until

MAX_FRAME = 1024 * 1024

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    d = short_tmpdir()
    config = d / "nested.toml"
    config.write_text(f"[daemon]\nmax_frame_bytes = {MAX_FRAME}\n")
    proc = DaemonProc(d / "n.sock", config).wait_ready()
    yield proc
    assert proc.stop() == 0
    shutil.rmtree(d, ignore_errors=True)


def nested(depth: int) -> msgspec.Raw:
    return msgspec.Raw(b"\x91" * depth + b"\xc0")


class Conn:
    def __init__(self, daemon: DaemonProc) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(daemon.socket))
        self.reader = FrameReader(MAX_FRAME)
        self.sock.sendall(encode_frame(Hello(version=1)))
        assert isinstance(self.read(1)[0], Welcome)

    def read(self, n: int) -> list[object]:
        """The next `n` frames (fails if the daemon closes first)."""
        out: list[object] = []
        while len(out) < n:
            data = self.sock.recv(65536)
            assert data, f"the daemon closed the connection after {out}"
            out.extend(decode_server(f) for f in self.reader.feed(data))
        return out

    def close(self) -> None:
        self.sock.close()


def _by_id(frames: list[object]) -> dict[int | None, object]:
    out: dict[int | None, object] = {}
    for f in frames:
        assert isinstance(f, Reply | Fail), f
        out[f.id] = f
    return out


def test_a_deep_request_fails_alone_and_its_pipelined_neighbours_are_served(
    daemon: DaemonProc,
) -> None:
    conn = Conn(daemon)
    try:
        conn.sock.sendall(
            encode_frame(Ask(1, "echo", encode_body("before"), 5))
            + encode_frame(Ask(2, "echo", nested(5_000), 5))
            + encode_frame(Tell(3, "echo", nested(500_000)))
            + encode_frame(Ask(4, "echo", encode_body("after"), 5))
            + encode_frame(Ping(5))
        )
        got = _by_id(conn.read(5))
        assert set(got) == {1, 2, 3, 4, 5}
        for rid in (2, 3):
            fail = got[rid]
            assert isinstance(fail, Fail), fail
            assert fail.error.kind == "bad_message"
            assert "nested too deeply" in fail.error.message
        for rid, text in ((1, "before"), (4, "after")):
            reply = got[rid]
            assert isinstance(reply, Reply)
            assert msgspec.msgpack.decode(reply.body) == text
        # still alive afterwards
        conn.sock.sendall(encode_frame(Ping(6)))
        (pong,) = conn.read(1)
        assert isinstance(pong, Reply) and pong.id == 6
    finally:
        conn.close()


def test_every_depth_around_the_nesting_limit_gets_its_exact_answer(daemon: DaemonProc) -> None:
    """An echo body nested `d` deep is a frame `d + 1` deep: up to `MAX_NESTING_DEPTH` it
    is echoed back whole, one more is `bad_message` for its own id — never `internal`, and
    the service never crashes."""
    with phloem.Client.connect(daemon.socket) as client:
        restarts = client.status().restarts
    conn = Conn(daemon)
    try:
        depths = range(MAX_NESTING_DEPTH - 8, MAX_NESTING_DEPTH + 8)
        for i, depth in enumerate(depths, start=1):
            conn.sock.sendall(encode_frame(Ask(i, "echo", nested(depth), 5)))
            (answer,) = conn.read(1)
            assert isinstance(answer, Reply | Fail) and answer.id == i, answer
            if depth + 1 <= MAX_NESTING_DEPTH:
                assert isinstance(answer, Reply), (depth, answer)
                assert bytes(answer.body) == bytes(nested(depth))
            else:
                assert isinstance(answer, Fail) and answer.error.kind == "bad_message", depth
                assert f"more than {MAX_NESTING_DEPTH} levels" in answer.error.message
        conn.sock.sendall(encode_frame(Ping(0)))
        (pong,) = conn.read(1)
        assert isinstance(pong, Reply)
    finally:
        conn.close()
    with phloem.Client.connect(daemon.socket) as client:
        assert client.status().restarts == restarts


def test_deep_requests_are_logged_once_per_connection_and_never_as_a_traceback(
    daemon: DaemonProc,
) -> None:
    with phloem.Client.connect(daemon.socket) as client:  # earlier connections are gone
        wait_until(lambda: client.status().connections == 1)
    start = len(daemon.lines)
    conn = Conn(daemon)
    try:
        conn.sock.sendall(
            b"".join(encode_frame(Ask(i, "echo", nested(10_000), 5)) for i in range(20))
        )
        frames = conn.read(20)
        assert all(isinstance(f, Fail) and f.error.kind == "bad_message" for f in frames)
    finally:
        conn.close()
    with phloem.Client.connect(daemon.socket) as client:
        client.ping()
    wait_until(
        lambda: any("requests_too_deep" in line for line in daemon.lines[start:]),
        what="no requests_too_deep log line",
    )
    time.sleep(0.2)
    lines = daemon.lines[start:]
    events = [json.loads(line) for line in lines if line.startswith("{")]
    deep = [e for e in events if e["event"] == "requests_too_deep"]
    assert len(deep) == 1, deep
    assert deep[0]["count"] == 20
    assert not any("Traceback" in line for line in lines), "".join(lines)
    assert not any(e["event"] == "connection_failed" for e in events)
