"""Process children: start-to-ready latency and channel round trip, each beside its floor.

1. `start_process` of a trivial `ProcessTarget` until it reports ready, vs a raw
   `os.fork()` in a fresh single-threaded Python process (fork → the child writes one
   byte on a pipe → the parent reads it), measured in a subprocess in the same run;
   back to back (the idle pool is often empty) and paced (it is full).
2. `ProcessHandle.request` round trip to an echoing child, vs a `multiprocess.Pipe`
   round trip to an echoing process.
Both report the median of `SAMPLES` runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import multiprocess

from phloem.supervision.forkserver import get_server
from phloem.supervision.process import start_process
from phloem.supervision.spec import ProcessTarget
from tests.perf.common import median_seconds, row
from tests.supervision import process_targets

SAMPLES = 200
PACED_PAUSE_S = 0.02  # callbacks arrive spaced out: the fork server's idle pool is full
ROUND_TRIPS = 2_000
MESSAGE = {"op": "echo", "seq": 1, "payload": "x" * 64}

_RAW_FORK = """
import json, os, statistics, sys, time
samples = []
r, w = os.pipe()
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.write(w, b"x")
        os._exit(0)
    os.read(r, 1)
    samples.append(time.perf_counter() - t0)
    os.waitpid(pid, 0)
print(json.dumps(statistics.median(samples)))
"""


def _raw_fork_floor(samples: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _RAW_FORK, str(samples)],
        capture_output=True,
        check=True,
        text=True,
        timeout=120,
    )
    return float(json.loads(out.stdout))


def _start_to_ready(samples: int, pause: float = 0.0) -> float:
    """Median start-to-ready; `pause` seconds between starts let the idle pool refill."""
    get_server()
    target = ProcessTarget(os.getpid)
    for _ in range(20):
        start_process(target, name="warmup").stop(0)
    times = []
    for _ in range(samples):
        time.sleep(pause)
        t0 = time.perf_counter()
        h = start_process(target, name="bench")
        times.append(time.perf_counter() - t0)
        h.stop(0)
    return statistics.median(times)


def _pipe_echo(conn: Any, other: Any) -> None:
    other.close()  # the daemon's end, inherited by fork: close it so EOF can arrive
    try:
        while True:
            conn.send(conn.recv())
    except EOFError:
        return


def _pipe_round_trip(n: int) -> float:
    ours, theirs = multiprocess.Pipe()
    proc = multiprocess.get_context("fork").Process(
        target=_pipe_echo, args=(theirs, ours), daemon=True
    )
    proc.start()
    theirs.close()
    try:

        def once() -> None:
            ours.send(MESSAGE)
            ours.recv()

        return median_seconds(once, n, warmup=200)
    finally:
        ours.close()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(10)


def _request_round_trip(n: int) -> float:
    h = start_process(ProcessTarget(process_targets.echo, pass_channel=True), name="echo")
    try:
        return median_seconds(lambda: h.request(MESSAGE, 10), n, warmup=200)
    finally:
        h.stop(5)


def run() -> list[dict[str, Any]]:
    floor_fork = _raw_fork_floor(SAMPLES)
    start = _start_to_ready(SAMPLES)
    start_paced = _start_to_ready(SAMPLES, PACED_PAUSE_S)
    floor_pipe = _pipe_round_trip(ROUND_TRIPS)
    request = _request_round_trip(ROUND_TRIPS)
    return [
        row(
            "process child start to ready",
            start * 1e3,
            "ms",
            "raw os.fork + pipe byte (fresh single-threaded process)",
            floor_fork * 1e3,
            2.0,
        ),
        row(
            f"process child start to ready, {PACED_PAUSE_S * 1e3:g} ms between starts",
            start_paced * 1e3,
            "ms",
            "raw os.fork + pipe byte (fresh single-threaded process)",
            floor_fork * 1e3,
            None,
        ),
        row(
            "process child request round trip",
            request * 1e6,
            "us",
            "multiprocess.Pipe round trip",
            floor_pipe * 1e6,
            1.5,
        ),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
