"""Benchmark: client → daemon `ask` to the echo service vs a raw Unix-socket round trip.

Floors are measured in the same run: a minimal echo server in its own process that
reads a 4-byte length-prefixed frame and writes it back (one thread per connection),
driven the same way as the daemon. Figures:

- one client, sequential asks: median round trip (target: at most twice the raw round
  trip), and the same against the sum of the two hops an ask is made of (a raw socket
  round trip plus a raw pykka ask), which shows phloem's own overhead;
- 64 concurrent clients (threads, one connection each): total asks per second;
- 64 concurrent asks pipelined on ONE connection (native `AsyncClient`, 64 coroutines at
  the daemon's default in-flight limit): total asks per second, against the same raw
  64-connection echo floor.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import phloem
from tests.perf.common import median_seconds, row

ROUND_TRIPS = 3_000
CLIENTS = 64
ASKS_PER_CLIENT = 150
PAYLOAD = {"payload": "x" * 32}
ROOT = Path(__file__).resolve().parents[2]

_RAW_SERVER = r"""
import os, socket, struct, sys, threading
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(256)
print("ready", flush=True)

def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf

def serve(conn):
    with conn:
        while True:
            head = recv_exact(conn, 4)
            if head is None:
                return
            body = recv_exact(conn, struct.unpack(">I", head)[0])
            if body is None:
                return
            conn.sendall(head + body)

while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


class _RawClient:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        body = json.dumps(PAYLOAD).encode()
        self.frame = struct.pack(">I", len(body)) + body

    def roundtrip(self) -> None:
        self.sock.sendall(self.frame)
        need = len(self.frame)
        got = 0
        while got < need:
            chunk = self.sock.recv(need - got)
            if not chunk:
                raise ConnectionError("raw server closed")
            got += len(chunk)

    def close(self) -> None:
        self.sock.close()


def _start(argv: list[str], ready: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    stream = proc.stderr if ready == "daemon_ready" else proc.stdout
    assert stream is not None
    for line in stream:
        if ready in line:
            # keep draining so a chatty process never blocks on a full pipe
            threading.Thread(target=stream.read, daemon=True).start()
            return proc
    proc.kill()
    proc.wait(10)
    raise RuntimeError(f"{argv[:4]} exited before {ready!r}")


def _throughput(make: Any, call: str) -> float:
    clients = [make() for _ in range(CLIENTS)]
    barrier = threading.Barrier(CLIENTS + 1)

    def work(c: Any) -> None:
        fn = getattr(c, call)
        barrier.wait()
        for _ in range(ASKS_PER_CLIENT):
            fn()

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for c in clients:
        c.close()
    return CLIENTS * ASKS_PER_CLIENT / elapsed


class _Asker:
    def __init__(self, path: Path) -> None:
        self.client = phloem.Client.connect(path)

    def ask(self) -> None:
        self.client.ask("echo", PAYLOAD)

    def close(self) -> None:
        self.client.close()


def _pipelined_rate(path: Path) -> float:
    """Asks/s of `CLIENTS` coroutines sharing one native `AsyncClient` connection."""

    async def main() -> float:
        async with await phloem.AsyncClient.connect(path) as client:
            await asyncio.gather(*(client.ask("echo", PAYLOAD) for _ in range(200)))  # warm-up

            async def worker() -> None:
                for _ in range(ASKS_PER_CLIENT):
                    await client.ask("echo", PAYLOAD)

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(CLIENTS)))
            return CLIENTS * ASKS_PER_CLIENT / (time.perf_counter() - start)

    return asyncio.run(main())


def _pykka_ask_seconds() -> float:
    """Median round trip of a bare pykka ask in this process (the actor hop)."""
    import pykka

    class Echo(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> Any:
            return message

    ref = Echo.start()
    try:
        return median_seconds(lambda: ref.ask(PAYLOAD), ROUND_TRIPS, warmup=200)
    finally:
        ref.stop()


def run() -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="phlb"))
    (tmp / "c.toml").write_text("[daemon]\nmax_connections = 256\n")
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(_start([sys.executable, "-c", _RAW_SERVER, str(tmp / "raw.sock")], "ready"))
        argv = [sys.executable, "-m", "phloem", "daemon", "--config", str(tmp / "c.toml")]
        procs.append(_start([*argv, "--socket", str(tmp / "d.sock")], "daemon_ready"))
        raw_client = _RawClient(tmp / "raw.sock")
        client = phloem.Client.connect(tmp / "d.sock")
        floor = median_seconds(raw_client.roundtrip, ROUND_TRIPS, warmup=200)
        value = median_seconds(lambda: client.ask("echo", PAYLOAD), ROUND_TRIPS, warmup=200)
        raw_client.close()
        client.close()
        pykka_floor = _pykka_ask_seconds()
        raw_rate = _throughput(lambda: _RawClient(tmp / "raw.sock"), "roundtrip")
        rate = _throughput(lambda: _Asker(tmp / "d.sock"), "ask")
        pipelined_rate = _pipelined_rate(tmp / "d.sock")
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    return [
        row(
            "client → daemon ask round trip (echo service)",
            value * 1e6,
            "µs",
            "raw Unix-socket round trip, same payload",
            floor * 1e6,
            2.0,
        ),
        row(
            "client → daemon ask round trip (echo service)",
            value * 1e6,
            "µs",
            "raw Unix-socket round trip + raw pykka ask (the two hops it is made of)",
            (floor + pykka_floor) * 1e6,
            2.0,
        ),
        row(
            f"{CLIENTS} concurrent clients, asks/s",
            rate,
            "asks/s",
            f"raw Unix-socket echo, {CLIENTS} connections",
            raw_rate,
            None,
            higher_is_better=True,
        ),
        row(
            f"{CLIENTS} concurrent asks pipelined on ONE connection (native AsyncClient), asks/s",
            pipelined_rate,
            "asks/s",
            f"raw Unix-socket echo, {CLIENTS} connections",
            raw_rate,
            None,
            higher_is_better=True,
        ),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
