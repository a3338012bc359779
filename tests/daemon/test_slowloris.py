"""Slowloris: connections that never say hello must not starve real clients. They wait in
their own small budget (`daemon.max_pending_handshakes`), the oldest is dropped when it
is full, and none of them counts against `max_connections` (issue 11, item 8)."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import phloem
from phloem.daemon.handshake import MAX_HELLO_BYTES
from phloem.protocols.wire import (
    Fail,
    FrameReader,
    Hello,
    Ping,
    Reply,
    Welcome,
    decode_server,
    encode_frame,
)
from tests.helpers import DaemonProc, short_tmpdir, wait_until

SILENT = 200
CLIENTS = 32
SERVED_WITHIN_S = 1.0
PENDING = 16

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    d = short_tmpdir()
    config = d / "slow.toml"
    # a long handshake deadline: the silent connections are not saved by timing out
    config.write_text(
        f"[daemon]\nmax_connections = 64\nhandshake_timeout_s = 30.0\n"
        f"max_pending_handshakes = {PENDING}\n"
    )
    proc = DaemonProc(d / "s.sock", config).wait_ready()
    yield proc
    assert proc.stop() == 0
    shutil.rmtree(d, ignore_errors=True)


def _silent(path: Path, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(path))  # blocking: waits for room in the listen backlog
        s.settimeout(10)
        socks.append(s)
    return socks


def _client(path: Path, results: list[float | str]) -> None:
    start = time.monotonic()
    try:
        with phloem.Client.connect(path, timeout=SERVED_WITHIN_S) as client:
            client.ping(timeout=SERVED_WITHIN_S)
            assert client.ask("echo", "hi", timeout=SERVED_WITHIN_S) == "hi"
    except Exception as exc:
        results.append(f"{type(exc).__name__}: {exc}")
        return
    results.append(time.monotonic() - start)


def test_silent_connections_do_not_starve_real_clients(daemon: DaemonProc) -> None:
    proc = psutil.Process(daemon.proc.pid)
    threads = proc.num_threads()
    silent = _silent(daemon.socket, SILENT)
    try:
        # Waiting for a hello costs no thread: with SILENT connections held, the count is
        # back to what it was (a pool worker that grew meanwhile ends once idle).
        wait_until(lambda: proc.num_threads() <= threads, timeout=20, what="threads back")
        results: list[float | str] = []
        threads = [
            threading.Thread(target=_client, args=(daemon.socket, results)) for _ in range(CLIENTS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        late = [r for r in results if isinstance(r, str) or r > SERVED_WITHIN_S]
        assert not late, f"{len(late)} of {CLIENTS} clients not served within 1 s: {late[:3]}"
        # the oldest silent connections were dropped to make room, with a reason
        dropped = _read_dropped(silent[: SILENT - PENDING])
        assert dropped and all(kind == "too_many_connections" for kind in dropped), dropped
        with phloem.Client.connect(daemon.socket) as client:
            assert client.status().connections == 1  # silent ones are not connections
    finally:
        for s in silent:
            s.close()


def _read_dropped(socks: list[socket.socket]) -> list[str]:
    kinds = []
    for s in socks:
        reader = FrameReader(65536)
        s.settimeout(5)
        frames: list[bytes] = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            frames.extend(reader.feed(data))
        for f in frames:
            message = decode_server(f)
            assert isinstance(message, Fail) and message.id is None
            kinds.append(message.error.kind)
    return kinds


def test_silent_connections_never_count_against_max_connections(daemon: DaemonProc) -> None:
    """64 established clients (max_connections) and more silent ones than the budget:
    every established client keeps working, and one more client is refused only for
    max_connections."""
    with phloem.Client.connect(daemon.socket) as probe:  # earlier tests' clients are gone
        wait_until(lambda: probe.status().connections == 1)
    clients = [phloem.Client.connect(daemon.socket) for _ in range(63)]
    silent = _silent(daemon.socket, PENDING * 3)
    try:
        for c in clients:
            c.ping(timeout=5)
        last = phloem.Client.connect(daemon.socket, timeout=5)  # the 64th
        last.ping()
        with pytest.raises(phloem.PhloemError) as err:
            phloem.Client.connect(daemon.socket, timeout=5)
        assert err.value.kind == "too_many_connections"
        assert "max_connections" in err.value.message
        last.close()
        wait_until(lambda: clients[0].status().connections == 63)
    finally:
        for c in clients:
            c.close()
        for s in silent:
            s.close()


def _hello_exchange(path: Path, data: bytes, pause: float = 0.0) -> list[object]:
    """Send `data` (byte by byte with `pause` between them, if set), half-close, and
    read every frame the daemon sends until it closes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(path))
    try:
        if pause:
            for i in range(len(data)):
                s.sendall(data[i : i + 1])
                time.sleep(pause)
        else:
            s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        reader = FrameReader(65536)
        frames: list[bytes] = []
        while data := s.recv(65536):
            frames.extend(reader.feed(data))
        return [decode_server(f) for f in frames]
    finally:
        s.close()


def test_a_hello_sent_byte_by_byte_with_requests_behind_it_is_served(
    daemon: DaemonProc,
) -> None:
    request = encode_frame(Hello(version=1)) + encode_frame(Ping(1)) + encode_frame(Ping(2))
    welcome, *replies = _hello_exchange(daemon.socket, request, pause=0.002)
    assert isinstance(welcome, Welcome)
    assert sorted(r.id for r in replies if isinstance(r, Reply)) == [1, 2]


def test_a_first_frame_too_long_for_a_hello_is_refused(daemon: DaemonProc) -> None:
    big = encode_frame(Hello(version=1, client="x" * (MAX_HELLO_BYTES + 1)))
    (fail,) = _hello_exchange(daemon.socket, big)
    assert isinstance(fail, Fail) and fail.id is None
    assert fail.error.kind == "bad_frame" and "hello" in fail.error.message
