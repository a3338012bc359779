"""A storm of hostile frames against a daemon, from many connections at once, and the
daemon's RSS before and after it (issue 11, item 2).

`storm(path, frames, connections)` sends `frames` hostile frames over `connections`
concurrent connections. Each connection runs sessions back to back: connect, hello, a
pipeline of deeply nested asks (each answered `bad_message`, the connection lives),
then usually one frame that ends the session: undecodable bytes, a map of the wrong
types, a header over `max_frame_bytes`, a garbage frame of 1-4 MiB (multi-MB frames are
what left glibc arenas behind), or a frame cut short by a half-close. Every session
reads until the daemon closes it, so the storm also checks that each got its answers.

`measure(...)` starts nothing: it warms a running daemon up with ordinary clients,
records its RSS, runs the storm, waits for its connections and threads to go, and
records the RSS again. Run it by hand for the full figure:

    .venv/bin/python -m tests.daemon.wire_storm [FRAMES] [CONNECTIONS]
"""

from __future__ import annotations

import random
import shutil
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import psutil

import phloem
from phloem.protocols.wire import (
    Ask,
    Fail,
    FrameReader,
    Hello,
    Welcome,
    decode_server,
    encode_frame,
)

MAX_FRAME = 4 * 1024 * 1024  # the daemon's default max_frame_bytes
NESTED_DEPTH = 2_000
LARGE_SIZES = (1024 * 1024, MAX_FRAME)


@dataclass
class StormStats:
    frames: int = 0
    sessions: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    answers: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, other: StormStats) -> None:
        self.frames += other.frames
        self.sessions += other.sessions
        for k, v in other.by_kind.items():
            self.by_kind[k] = self.by_kind.get(k, 0) + v
        for k, v in other.answers.items():
            self.answers[k] = self.answers.get(k, 0) + v
        self.problems.extend(other.problems)


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _nested_ask(rid: int) -> bytes:
    return encode_frame(Ask(rid, "echo", msgspec.Raw(b"\x91" * NESTED_DEPTH + b"\xc0"), 5))


def _ending(rng: random.Random, large_every: int) -> tuple[str, bytes]:
    """One frame that ends its session (or nothing: the session just half-closes)."""
    if large_every and rng.randrange(large_every) == 0:
        size = rng.randint(*LARGE_SIZES) - 4
        return "large", _frame(b"\xc1" + rng.randbytes(64) * (size // 64))
    kind = rng.choice(["garbage", "wrong_types", "oversized", "truncated", "none"])
    if kind == "garbage":
        return kind, _frame(b"\xc1" + rng.randbytes(rng.randint(0, 200)))
    if kind == "wrong_types":
        return kind, _frame(msgspec.msgpack.encode({"t": "ask", "id": "x", "actor": 1}))
    if kind == "oversized":
        return kind, struct.pack(">I", rng.randint(MAX_FRAME + 1, 2**32 - 1)) + b"\0" * 8
    if kind == "truncated":
        body = rng.randbytes(rng.randint(2, 200))
        return kind, _frame(body)[: 4 + len(body) // 2]
    return kind, b""


def _session(path: Path, rng: random.Random, budget: int, large_every: int) -> StormStats:
    stats = StormStats(sessions=1)
    nested = min(budget, rng.randint(0, 24))
    kind, ending = _ending(rng, large_every) if nested < budget else ("none", b"")
    payload = b"".join(_nested_ask(i) for i in range(nested)) + ending
    stats.frames = nested + (1 if ending else 0)
    stats.by_kind = {"nested": nested, kind: 1 if ending else 0}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    try:
        sock.connect(str(path))
        sock.sendall(encode_frame(Hello(version=1)))
        sender = threading.Thread(target=_send, args=(sock, payload))
        sender.start()  # large frames: send and read at once, as the daemon may answer early
        frames = _read_until_closed(sock)
        sender.join()
    except OSError as exc:
        stats.problems.append(f"{kind}: {exc!r}")
        return stats
    finally:
        sock.close()
    messages = [decode_server(f) for f in frames]
    if not messages or not isinstance(messages[0], Welcome):
        stats.problems.append(f"{kind}: no welcome: {messages[:2]}")
        return stats
    for m in messages[1:]:
        key = m.error.kind if isinstance(m, Fail) else type(m).__name__
        stats.answers[key] = stats.answers.get(key, 0) + 1
    deep = [m for m in messages[1:] if isinstance(m, Fail) and m.id is not None]
    if len(deep) != nested or any(m.error.kind != "bad_message" for m in deep):
        stats.problems.append(f"{kind}: {nested} nested asks, answers {messages[1:]}"[:300])
    return stats


def _send(sock: socket.socket, payload: bytes) -> None:
    try:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the daemon refused a frame and closed: the reader sees why


def _read_until_closed(sock: socket.socket) -> list[bytes]:
    reader = FrameReader(MAX_FRAME)
    frames: list[bytes] = []
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return frames
        if not data:
            return frames
        frames.extend(reader.feed(data))


def storm(
    path: Path, frames: int, connections: int, seed: int = 11, large_every: int = 50
) -> StormStats:
    """Send `frames` hostile frames over `connections` concurrent connections; about one
    session in `large_every` ends with a 1-4 MiB garbage frame (0: none)."""
    total = StormStats()
    lock = threading.Lock()
    share = [
        frames // connections + (1 if i < frames % connections else 0) for i in range(connections)
    ]

    def worker(i: int, budget: int) -> None:
        rng = random.Random(seed * 1000 + i)
        mine = StormStats()
        while mine.frames < budget:
            mine.add(_session(path, rng, budget - mine.frames, large_every))
        with lock:
            total.add(mine)

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i, n)) for i, n in enumerate(share)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total.seconds = time.monotonic() - start
    return total


def warm_up(path: Path, connections: int, asks: int = 200) -> None:
    """Ordinary traffic from `connections` clients at once: small asks, one 1 MiB echo."""

    def client() -> None:
        with phloem.Client.connect(path) as c:
            for i in range(asks):
                c.ask("echo", {"n": i, "text": "x" * 100})
            c.ask("echo", "x" * (1024 * 1024))

    threads = [threading.Thread(target=client) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def settle(path: Path, pid: int, threads: int, timeout: float = 30.0) -> None:
    """Wait until only the caller's connection is left and the thread count is back
    (`threads`, counted with no connection open; the caller's own connection may add
    one while it is open)."""
    proc = psutil.Process(pid)
    deadline = time.monotonic() + timeout
    with phloem.Client.connect(path) as c:
        while c.status().connections > 1 or proc.num_threads() > threads + 1:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{c.status().connections} connections, {proc.num_threads()} threads "
                    f"(baseline {threads}) {timeout} s after the storm"
                )
            time.sleep(0.05)
    wait_for(lambda: proc.num_threads() <= threads, deadline)
    time.sleep(0.5)


def wait_for(predicate: Callable[[], bool], deadline: float) -> None:
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the daemon's threads did not come back to their baseline")
        time.sleep(0.05)


@dataclass
class Measurement:
    rss_before: int
    rss_after: int
    rss_peak: int
    threads_before: int
    threads_after: int
    stats: StormStats

    @property
    def growth(self) -> float:
        return self.rss_after / self.rss_before - 1


def measure(
    path: Path, pid: int, frames: int, connections: int, warm_up_asks: int = 200, **kw: int
) -> Measurement:
    """RSS and threads of the daemon `pid` once warmed up, and after the storm."""
    proc = psutil.Process(pid)
    warm_up(path, connections, warm_up_asks)
    warm_up(path, connections, warm_up_asks)
    time.sleep(0.5)
    threads_before = proc.num_threads()
    before = proc.memory_info().rss
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], proc.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stats = storm(path, frames, connections, **kw)
    done.set()
    sampler.join()
    settle(path, pid, threads_before)
    after = proc.memory_info().rss
    return Measurement(before, after, peak[0], threads_before, proc.num_threads(), stats)


def main(argv: list[str]) -> int:
    from tests.helpers import DaemonProc, short_tmpdir

    frames = int(argv[0]) if argv else 100_000
    connections = int(argv[1]) if len(argv) > 1 else 16
    d = short_tmpdir()
    config = d / "storm.toml"
    config.write_text("")
    daemon = DaemonProc(d / "s.sock", config).wait_ready()
    try:
        m = measure(daemon.socket, daemon.proc.pid, frames, connections)
    finally:
        daemon.stop()
        shutil.rmtree(d, ignore_errors=True)
    mib = 1024 * 1024
    print(
        f"{m.stats.frames} frames, {m.stats.sessions} sessions, {connections} connections, "
        f"{m.stats.seconds:.1f} s; RSS {m.rss_before / mib:.1f} -> {m.rss_after / mib:.1f} MiB "
        f"({m.growth:+.1%}), peak {m.rss_peak / mib:.1f} MiB; threads "
        f"{m.threads_before} -> {m.threads_after}"
    )
    print(f"kinds {m.stats.by_kind}\nanswers {m.stats.answers}")
    for p in m.stats.problems[:10]:
        print("problem:", p)
    return 0 if not m.stats.problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
