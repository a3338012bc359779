"""Benchmark: Gemini Live sessions in a daemon against the fake Live server.

The fake server (`phloem.actors.live.fake_server`) runs in its own process; the daemon in
another; the clients here. Figures, each beside a floor measured in the same run:

- 1,000 concurrent open sessions: the daemon's RSS per idle session (goal ≤ 64 KiB),
  beside the RSS per connection of 1,000 bare `websockets` client connections held by
  one process; and open-to-`ready` latency p50 / p99 (32 opens in flight at a time,
  subscribe included), beside 1,000 bare `websockets` connect + setup →
  `setupComplete` against the same server, also 32 at a time;
- 100 sessions streaming 16 kHz PCM in 100 ms chunks in real time, the server echoing
  each chunk as text stamped with its send time: p99 latency from the server's frame to
  its event at the subscriber (goal < 50 ms), beside the same latency to a bare
  `websockets` client;
- "Live text round trip": one session's text turn (`live_send` → `turn_complete` event)
  through phloem, beside the same turn (send → `turnComplete`) over a bare `websockets`
  connection to the same fake server, in the same interleaved rounds, both without
  permessage-deflate (goal: at most 2 times). `python -m tests.perf.bench_live rt`
  runs only this row.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from websockets.asyncio.client import connect

import phloem
from phloem.protocols import live as wire
from tests.perf.common import row

ROOT = Path(__file__).resolve().parents[2]
IDLE_SESSIONS = 1_000
STREAM_SESSIONS = 100
STREAM_SECONDS = 5.0
CHUNK_S = 0.1
CHUNK = b"\x01\x00" * 1600  # 100 ms of 16 kHz 16-bit mono PCM
RT_ROUNDS = 20  # interleaved rounds of the text round trip, each way
RT_PER_ROUND = 20
RT_WARMUP = 20
RT_TARGET = 2.0  # issue 31 item 6: at most 2x a bare websockets client
OPEN_CONCURRENCY = 32
SETUP = {"setup": {"model": "models/fake", "generationConfig": {"responseModalities": ["TEXT"]}}}
WINDOW = phloem.CreditWindow(64, 1 << 20)


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _start(argv: list[str], ready: str, *, stderr: bool) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ, PHLOEM_BENCH_LIVE_KEY="bench-key")
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    stream = proc.stderr if stderr else proc.stdout
    assert stream is not None
    for line in stream:
        if ready in line:
            threading.Thread(target=stream.read, daemon=True).start()
            return proc, line.strip()
    raise RuntimeError(f"{argv[2:]} did not start")


def _ws_url(base: str) -> str:
    return base + wire.ws_path("v1beta")


# -- floors: bare websockets clients --------------------------------------------------


async def _bare_setup(url: str) -> tuple[Any, float]:
    t0 = time.perf_counter()
    ws = await connect(url, compression=None, max_size=wire.MAX_SERVER_FRAME_BYTES)
    await ws.send(json.dumps(SETUP))
    await ws.recv()
    return ws, time.perf_counter() - t0


_BARE_HOLD = r"""
import asyncio, json, sys, psutil
from websockets.asyncio.client import connect
url, n = sys.argv[1], int(sys.argv[2])
async def main():
    me = psutil.Process()
    conns = [await connect(url, compression=None)]
    before = me.memory_info().rss
    for _ in range(n):
        ws = await connect(url, compression=None)
        await ws.send(json.dumps({"setup": {"model": "models/fake"}}))
        await ws.recv()
        conns.append(ws)
    print((me.memory_info().rss - before) / n, flush=True)
asyncio.run(main())
"""


def _bare_rss_per_connection(url: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _BARE_HOLD, url, str(IDLE_SESSIONS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return float(out.stdout.strip())


async def _bare_stream_latency(url: str) -> list[float]:
    samples: list[float] = []

    async def one() -> None:
        ws, _ = await _bare_setup(url)
        frame = wire.encode_client(wire.audio_input(CHUNK)).decode()

        async def reader() -> None:
            async for raw in ws:
                parts = json.loads(raw)["serverContent"]["modelTurn"]["parts"]
                samples.append(time.time() - float(parts[0]["text"]))

        task = asyncio.create_task(reader())
        end = time.monotonic() + STREAM_SECONDS
        while time.monotonic() < end:
            await ws.send(frame)
            await asyncio.sleep(CHUNK_S)
        await asyncio.sleep(0.3)
        task.cancel()
        await ws.close()

    await asyncio.gather(*(one() for _ in range(STREAM_SESSIONS)))
    return samples


async def _bare_round_trip(ws: Any, i: int) -> float:
    """One text turn over a bare connection: send, read until `turnComplete`."""
    t0 = time.perf_counter()
    await ws.send(wire.encode_client(wire.text_input(f"ping {i}")).decode())
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("serverContent", {}).get("turnComplete"):
            return time.perf_counter() - t0


# -- phloem ----------------------------------------------------------------------------


async def _open_ready(client: phloem.AsyncClient) -> tuple[str, Any, float]:
    t0 = time.perf_counter()
    ref = await client.live_open({"response_modalities": ["TEXT"]})
    stream = await client.live_events(ref, WINDOW)
    async for event in stream:
        if event.kind == "ready":
            return ref, stream, time.perf_counter() - t0
        raise RuntimeError(f"session ended before ready: {event.payload}")
    raise RuntimeError("stream ended before ready")


async def _idle_sessions(sock: Path, daemon: psutil.Process) -> tuple[float, list[float]]:
    async with await phloem.AsyncClient.connect(sock) as client:
        ref, _stream, _ = await _open_ready(client)  # warm: the loop, imports, the first thread
        await client.live_close(ref)
        before = daemon.memory_info().rss
        gate = asyncio.Semaphore(OPEN_CONCURRENCY)
        latencies: list[float] = []

        async def one() -> None:
            async with gate:
                _, _, took = await _open_ready(client)
                latencies.append(took)

        await asyncio.gather(*(one() for _ in range(IDLE_SESSIONS)))
        await asyncio.sleep(1.0)
        per_session = (daemon.memory_info().rss - before) / IDLE_SESSIONS
    return per_session, latencies


async def _stream_latency(sock: Path) -> list[float]:
    samples: list[float] = []
    async with await phloem.AsyncClient.connect(sock) as client:
        sessions = [await _open_ready(client) for _ in range(STREAM_SESSIONS)]

        async def one(ref: str, stream: Any) -> None:
            async def reader() -> None:
                async for event in stream:
                    if event.kind == "text":
                        samples.append(time.time() - float(event.payload["text"]))

            task = asyncio.create_task(reader())
            end = time.monotonic() + STREAM_SECONDS
            while time.monotonic() < end:
                await client.live_send(ref, audio=CHUNK)
                await asyncio.sleep(CHUNK_S)
            await asyncio.sleep(0.3)
            await client.live_close(ref)
            await task

        await asyncio.gather(*(one(ref, stream) for ref, stream, _ in sessions))
    return samples


def _round_trips(sock: Path, url: str) -> tuple[list[float], list[float]]:
    """Text round trips through phloem and over a bare connection, interleaved.

    `RT_ROUNDS` rounds of `RT_PER_ROUND` turns each way, alternating which side goes
    first, so both see the same load; the bare side uses the same `compression=None`
    as phloem's upstream link (and the fake server), so neither pays permessage-deflate.
    The first `RT_WARMUP` turns each way are dropped. Returns (phloem, bare) samples.
    """
    ours: list[float] = []
    bare: list[float] = []
    with asyncio.Runner() as runner, phloem.Client.connect(sock) as client:
        ws, _ = runner.run(_bare_setup(url))
        ref = client.live_open({"response_modalities": ["TEXT"]})
        events = client.live_events(ref, WINDOW)
        while events.recv(30).kind != "ready":
            pass

        def phloem_turn(i: int) -> float:
            t0 = time.perf_counter()
            client.live_send(ref, text=f"ping {i}")
            while events.recv(30).kind != "turn_complete":
                pass
            return time.perf_counter() - t0

        async def bare_turns(n: int, base: int) -> list[float]:
            return [await _bare_round_trip(ws, base + k) for k in range(n)]

        for i in range(RT_WARMUP):
            phloem_turn(i)
        runner.run(bare_turns(RT_WARMUP, 0))
        for r in range(RT_ROUNDS):
            base = RT_WARMUP + r * RT_PER_ROUND
            if r % 2:
                bare += runner.run(bare_turns(RT_PER_ROUND, base))
            ours += [phloem_turn(base + k) for k in range(RT_PER_ROUND)]
            if not r % 2:
                bare += runner.run(bare_turns(RT_PER_ROUND, base))
        client.live_close(ref)
        runner.run(ws.close())
    return ours, bare


def _daemon(tmp: Path, base_url: str) -> tuple[subprocess.Popen[str], Path]:
    config = tmp / "c.toml"
    config.write_text(
        f"""[supervision]
max_refs_per_owner = 20000
max_streams = 20000
[live]
base_url = "{base_url}"
api_key_env = "PHLOEM_BENCH_LIVE_KEY"
session_limit = 4096
"""
    )
    sock = tmp / "d.sock"
    argv = [sys.executable, "-m", "phloem", "daemon", "--config", str(config)]
    proc, _ = _start([*argv, "--socket", str(sock)], "daemon_ready", stderr=True)
    return proc, sock


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def run() -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="phll"))
    procs: list[subprocess.Popen[str]] = []
    rows: list[dict[str, Any]] = []
    try:
        fake = [sys.executable, "-m", "phloem.actors.live.fake_server", "--echo-audio"]
        server, base_url = _start(fake, "ws://", stderr=False)
        procs.append(server)
        url = _ws_url(base_url)

        # 1. idle sessions: RSS and open-to-ready latency
        bare_rss = _bare_rss_per_connection(url)
        bare_setups = asyncio.run(_bare_setup_latencies(url))
        daemon, sock = _daemon(tmp, base_url)
        procs.append(daemon)
        per_session, latencies = asyncio.run(_idle_sessions(sock, psutil.Process(daemon.pid)))
        _stop(daemon)
        procs.remove(daemon)
        rows.append(
            row(
                f"live: daemon RSS per idle session ({IDLE_SESSIONS} open; goal <= 64 KiB)",
                per_session / 1024,
                "KiB",
                "bare websockets connection RSS",
                bare_rss / 1024,
                None,
            )
        )
        rows.append(
            row(
                "live: open -> ready p50",
                _pct(latencies, 0.5) * 1e3,
                "ms",
                "bare connect+setup p50",
                _pct(bare_setups, 0.5) * 1e3,
                None,
            )
        )
        rows.append(
            row(
                "live: open -> ready p99",
                _pct(latencies, 0.99) * 1e3,
                "ms",
                "bare connect+setup p99",
                _pct(bare_setups, 0.99) * 1e3,
                None,
            )
        )

        # 2. streaming: server frame -> subscriber event
        daemon, sock = _daemon(tmp, base_url)
        procs.append(daemon)
        bare = asyncio.run(_bare_stream_latency(url))
        ours = asyncio.run(_stream_latency(sock))
        rows.append(
            row(
                f"live: {STREAM_SESSIONS} sessions streaming PCM, "
                "server frame -> event p99 (goal < 50 ms)",
                _pct(ours, 0.99) * 1e3,
                "ms",
                "bare websockets client p99",
                _pct(bare, 0.99) * 1e3,
                None,
            )
        )

        # 3. one session's text round trip, interleaved with the bare one
        rows.append(_round_trip_row(sock, url))
    finally:
        for proc in procs:
            _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


async def _bare_setup_latencies(url: str) -> list[float]:
    """Connect + setup of `IDLE_SESSIONS` bare connections, `OPEN_CONCURRENCY` at a time
    (as the sessions are opened), all held open until the end."""
    gate = asyncio.Semaphore(OPEN_CONCURRENCY)
    samples: list[float] = []
    held: list[Any] = []

    async def one() -> None:
        async with gate:
            ws, took = await _bare_setup(url)
            samples.append(took)
            held.append(ws)

    await asyncio.gather(*(one() for _ in range(IDLE_SESSIONS)))
    await asyncio.gather(*(ws.close() for ws in held))
    return samples


def _round_trip_row(sock: Path, url: str) -> dict[str, Any]:
    ours, bare = _round_trips(sock, url)
    return row(
        "Live text round trip (live_send -> turn_complete), median",
        statistics.median(ours) * 1e6,
        "us",
        "bare websockets round trip, same rounds",
        statistics.median(bare) * 1e6,
        RT_TARGET,
    )


def run_round_trip() -> list[dict[str, Any]]:
    """Only the text round trip row (a fake server and a daemon of its own)."""
    tmp = Path(tempfile.mkdtemp(prefix="phll"))
    procs: list[subprocess.Popen[str]] = []
    try:
        fake = [sys.executable, "-m", "phloem.actors.live.fake_server"]
        server, base_url = _start(fake, "ws://", stderr=False)
        procs.append(server)
        daemon, sock = _daemon(tmp, base_url)
        procs.append(daemon)
        return [_round_trip_row(sock, _ws_url(base_url))]
    finally:
        for proc in procs:
            _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    for r in run_round_trip() if sys.argv[1:] == ["rt"] else run():
        print(
            f"{r['name']}: {r['value']:.1f} {r['unit']} | {r['floor_name']}: "
            f"{r['floor']:.1f} | {r['ratio']:.2f}x (target {r['target']})"
        )
