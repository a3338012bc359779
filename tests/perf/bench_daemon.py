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

Peer, same run: an xoscar actor in a sub-process pool (`peer_xoscar.py`, run by a
throwaway venv under `bench-results/peers/`, installed on first use; xoscar is never a
phloem dependency). Its sequential ask median and its 64-coroutine rate (one actor ref)
are set beside ours: the goal is sync latency <= 1/2 of xoscar's and both 64-caller rates
>= 1.5x xoscar's (rows with target 0.67: xoscar's rate / ours). Every figure is the median
of `ROUNDS` rounds, and one round measures every system in turn, so a change in the
machine's load hits them alike; the load average is in `bench.json`. If the peer cannot be
installed or started, its rows say so and the others still run. A second peer for the
sync ask: a bare Ray actor method round trip (`ray.get(actor.ping.remote())`, a local
one-node Ray started by the bench: the `ray` extra phloem's dev install has), in the same
rounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import phloem
from tests.perf.bench_cluster import _Pinger
from tests.perf.common import median_seconds, row

ROUND_TRIPS = 1_000
ROUNDS = 3
CLIENTS = 64
ASKS_PER_CLIENT = 150
PAYLOAD = {"payload": "x" * 32}
ROOT = Path(__file__).resolve().parents[2]
PEER_VENV = ROOT / "bench-results" / "peers" / "venv"
PEER_PACKAGE = "xoscar==0.12.2"
PEER_INSTALL_TIMEOUT_S = 900
PEER_REPLY_TIMEOUT_S = 300

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


class _Peer:
    """The xoscar peer process (see `peer_xoscar.py`), driven one command per round."""

    def __init__(self) -> None:
        python = _peer_python()
        script = Path(__file__).with_name("peer_xoscar.py")
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.version = str(self._read()["ready"])

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        out: IO[str] = self.proc.stdout
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(out.readline()), daemon=True)
        reader.start()
        reader.join(PEER_REPLY_TIMEOUT_S)
        if not box or not box[0]:
            raise RuntimeError("xoscar peer gave no answer")
        return dict(json.loads(box[0]))

    def command(self, line: str) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return float(next(iter(self._read().values())))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _peer_python() -> Path:
    """The throwaway peer venv's python, created and filled on first use."""
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    probe = subprocess.run([str(python), "-c", "import xoscar"], check=False, capture_output=True)
    if probe.returncode != 0:
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", PEER_PACKAGE],
            check=True,
            timeout=PEER_INSTALL_TIMEOUT_S,
            capture_output=True,
        )
    return python


def _start_peer() -> tuple[_Peer | None, str]:
    try:
        peer = _Peer()
    except Exception as exc:  # the peer is optional: its rows say why it is missing
        return None, f"xoscar peer unavailable ({type(exc).__name__}: {exc})"[:200]
    return peer, f"xoscar {peer.version} actor in a sub-process pool"


def _start_ray() -> tuple[Any, str]:
    """A local one-node Ray and a function timing one actor method round trip (median
    of `ROUND_TRIPS`); (None, why) when Ray is not installed or does not start."""
    try:
        import ray

        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        actor: Any = ray.remote(_Pinger).options(num_cpus=0).remote()
        ray.get(actor.ping.remote(), timeout=120)
    except Exception as exc:  # the peer is optional: its row says why it is missing
        return None, f"Ray peer unavailable ({type(exc).__name__}: {exc})"[:200]

    def measure() -> float:
        return median_seconds(lambda: ray.get(actor.ping.remote()), ROUND_TRIPS, 200)

    return measure, f"ray {ray.__version__} actor, local one-node cluster"


def run() -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="phlb"))
    (tmp / "c.toml").write_text("[daemon]\nmax_connections = 256\n")
    procs: list[subprocess.Popen[str]] = []
    peer, peer_name = _start_peer()
    ray_peer, ray_name = _start_ray()
    keys = (
        "floor",
        "value",
        "pykka",
        "raw_rate",
        "rate",
        "pipelined",
        "xo_lat",
        "xo_rate",
        "ray_lat",
    )
    samples: dict[str, list[float]] = {key: [] for key in keys}
    try:
        procs.append(_start([sys.executable, "-c", _RAW_SERVER, str(tmp / "raw.sock")], "ready"))
        argv = [sys.executable, "-m", "phloem", "daemon", "--config", str(tmp / "c.toml")]
        procs.append(_start([*argv, "--socket", str(tmp / "d.sock")], "daemon_ready"))
        for _ in range(ROUNDS):
            raw_client = _RawClient(tmp / "raw.sock")
            client = phloem.Client.connect(tmp / "d.sock")
            samples["floor"].append(median_seconds(raw_client.roundtrip, ROUND_TRIPS, 200))
            samples["value"].append(
                median_seconds(lambda c=client: c.ask("echo", PAYLOAD), ROUND_TRIPS, 200)  # type: ignore[misc]
            )
            raw_client.close()
            client.close()
            samples["pykka"].append(_pykka_ask_seconds())
            if peer is not None:
                samples["xo_lat"].append(peer.command(f"latency {ROUND_TRIPS}"))
            if ray_peer is not None:
                samples["ray_lat"].append(ray_peer())
            samples["raw_rate"].append(
                _throughput(lambda: _RawClient(tmp / "raw.sock"), "roundtrip")
            )
            samples["rate"].append(_throughput(lambda: _Asker(tmp / "d.sock"), "ask"))
            samples["pipelined"].append(_pipelined_rate(tmp / "d.sock"))
            if peer is not None:
                samples["xo_rate"].append(peer.command(f"rate {CLIENTS} {ASKS_PER_CLIENT}"))
    finally:
        if peer is not None:
            peer.close()
        if ray_peer is not None:
            import ray

            ray.shutdown()
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    med = {key: statistics.median(got) if got else 0.0 for key, got in samples.items()}
    load = f"load {os.getloadavg()[0]:.1f}"
    rows = [
        row(
            "client → daemon ask round trip (echo service)",
            med["value"] * 1e6,
            "µs",
            "raw Unix-socket round trip, same payload",
            med["floor"] * 1e6,
            2.0,
        ),
        row(
            "client → daemon ask round trip (echo service)",
            med["value"] * 1e6,
            "µs",
            "raw Unix-socket round trip + raw pykka ask (the two hops it is made of)",
            (med["floor"] + med["pykka"]) * 1e6,
            2.0,
        ),
        row(
            f"{CLIENTS} concurrent clients, asks/s",
            med["rate"],
            "asks/s",
            f"raw Unix-socket echo, {CLIENTS} connections",
            med["raw_rate"],
            None,
            higher_is_better=True,
        ),
        row(
            f"{CLIENTS} concurrent asks pipelined on ONE connection (native AsyncClient), asks/s",
            med["pipelined"],
            "asks/s",
            f"raw Unix-socket echo, {CLIENTS} connections",
            med["raw_rate"],
            None,
            higher_is_better=True,
        ),
    ]
    peer_rows = [
        ("sync ask median vs peer", med["value"] * 1e6, "µs", med["xo_lat"] * 1e6, 0.5, False),
        (
            f"{CLIENTS} connections (threads) asks/s vs peer {CLIENTS} coroutines",
            med["rate"],
            "asks/s",
            med["xo_rate"],
            round(1 / 1.5, 2),
            True,
        ),
        (
            f"{CLIENTS} asks pipelined on ONE connection asks/s vs peer {CLIENTS} coroutines",
            med["pipelined"],
            "asks/s",
            med["xo_rate"],
            round(1 / 1.5, 2),
            True,
        ),
    ]
    rows.append(
        row(
            f"sync ask median vs a bare Ray actor method round trip ({load})",
            med["value"] * 1e6,
            "µs",
            ray_name,
            med["ray_lat"] * 1e6 or med["value"] * 1e6,
            None,
        )
    )
    for name, value, unit, floor, target, higher in peer_rows:
        rows.append(
            row(
                f"{name} (median of {ROUNDS} interleaved rounds, {load})",
                value,
                unit,
                peer_name,
                floor,
                target if peer is not None else None,
                higher_is_better=higher,
            )
        )
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
