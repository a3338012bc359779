"""Run starts: constant-time start and end, and the time to bring many agent runs to a
waiting model beside google-adk's `Runner` doing the same (issue 31, item 1).

Each run waits on a model whose answer is a future set only when the case ends (ADK's
awaits an event): a run that reached it is parked and holds no thread.

- flat starts: `FLAT_RUNS` (10,000, or what this machine's memory bears) waiting agent
  runs started one after another in an embedded `Tree`; the mean start of the last 200
  against the first 200 (goal <= 1.5x). A start that is linear in live runs (a
  duplicate-id scan, a rebuilt map, a removal comparing field by field) shows here as a
  last-200 mean growing with the count. Beside it, an OS thread start with those runs
  alive against one with none (it grew with the threads a process has, when each
  waiting run owned one).
- time to start `WAITING_RUNS` (5,000) waiting agent runs, until every one has reached
  its model, and the tree's RSS per waiting run, beside the same with ADK
  (`peer_adk.py`, run by a throwaway venv under `bench-results/peers/adk`, installed on
  first use; google-adk is never a phloem dependency). Goal <= 0.5x ADK for the time.
  Without the peer the rows say why and still report phloem's figures against
  themselves.
Rounds interleave phloem and the peer (`ROUNDS`); each figure is the median.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec
import psutil

from phloem import Tree
from phloem.agents import LlmAgent
from phloem.config import Config
from phloem.protocols.content import ModelRequest, ModelResponse
from tests.perf.bench_scale import _agent_runs_default
from tests.perf.common import row

ROOT = Path(__file__).resolve().parents[2]
ADK_VENV = ROOT / "bench-results" / "peers" / "adk"
ADK_PACKAGE = "google-adk==2.13.0"
PEER_INSTALL_TIMEOUT_S = 1200
PEER_RUN_TIMEOUT_S = 900
WAITING_RUNS = int(os.environ.get("PHLOEM_BENCH_WAITING_RUNS", "5000"))
FLAT_RUNS = int(os.environ.get("PHLOEM_BENCH_FLAT_RUNS", "0")) or min(10_000, _agent_runs_default())
ROUNDS = int(os.environ.get("PHLOEM_BENCH_START_ROUNDS", "1"))
BATCH = 200
DEADLINE_S = 900.0
FLAT_GOAL = 1.5
ADK_GOAL = 0.5


def _thread_start_ms() -> float:
    """Mean ms to start a thread (kept alive until all are started), over `BATCH`."""
    gate = threading.Event()
    threads = [threading.Thread(target=gate.wait, daemon=True) for _ in range(BATCH)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    mean = (time.perf_counter() - t0) / BATCH * 1e3
    gate.set()
    for t in threads:
        t.join()
    return mean


class _Waiting:
    """A model whose answers are futures set only at `release` (the peer's awaits an
    event): a run that reached it waits there, holding no thread (`submit`)."""

    provider_name = "bench"

    def __init__(self) -> None:
        self.reached = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._pending: list[Future[ModelResponse]] = []

    def generate(self, request: ModelRequest) -> ModelResponse:
        return self.submit(request).result(DEADLINE_S)

    def submit(self, request: ModelRequest) -> Future[ModelResponse]:
        answer: Future[ModelResponse] = Future()
        with self._lock:
            self._pending.append(answer)
        self.reached.release()
        return answer

    def release(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for answer in pending:
            answer.set_result(ModelResponse.from_text("done"))


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def _start_waiting(n: int, floors: list[float] | None = None) -> tuple[float, list[float], float]:
    """Seconds to bring `n` agent runs to their model, each start's time, and the tree's
    RSS per waiting run (KiB); `floors` gets a thread start's ms before the runs and
    while they all wait."""
    model = _Waiting()
    cfg = msgspec.convert({"agents": {"max_concurrent_runs": n}}, Config)
    starts: list[float] = []
    with Tree.start(cfg, name="bench-starts") as tree, tree.client() as client:
        tree.register_agent(LlmAgent("waiter", "", model))
        client.ask("echo", 0)
        if floors is not None:
            floors.append(_thread_start_ms())
        before = _rss()
        t0 = time.perf_counter()
        try:
            for _ in range(n):
                a = time.perf_counter()
                client.start_agent_run("waiter", input="go")
                starts.append(time.perf_counter() - a)
            for _ in range(n):
                if not model.reached.acquire(timeout=DEADLINE_S):
                    raise RuntimeError("agent runs did not all reach their model")
            seconds = time.perf_counter() - t0
            per_kib = (_rss() - before) / n / 1024
            if floors is not None:
                floors.append(_thread_start_ms())
        finally:
            model.release()
    return seconds, starts, per_kib


def adk_python() -> Path:
    """The throwaway ADK venv's python, created and filled on first use."""
    python = ADK_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(ADK_VENV)], check=True)
    probe = subprocess.run(
        [str(python), "-c", "import google.adk"], check=False, capture_output=True
    )
    if probe.returncode != 0:
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", ADK_PACKAGE],
            check=True,
            timeout=PEER_INSTALL_TIMEOUT_S,
            capture_output=True,
        )
    return python


def adk_command(*args: str) -> dict[str, Any]:
    """One command of `peer_adk.py` in the throwaway venv (its one JSON line)."""
    script = Path(__file__).with_name("peer_adk.py")
    done = subprocess.run(
        [str(adk_python()), str(script), *args],
        capture_output=True,
        text=True,
        timeout=PEER_RUN_TIMEOUT_S,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"ADK peer failed: {done.stderr.strip()[-200:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _adk_round(n: int) -> tuple[float | None, float | None, str]:
    try:
        result = adk_command("start_waiting", str(n))
    except Exception as exc:  # the peer is optional: its row says why it is missing
        return None, None, f"ADK peer unavailable ({type(exc).__name__}: {exc})"[:200]
    name = f"google-adk {result['version']} Runner, one event loop"
    return float(result["seconds"]), float(result["rss_kib"]), name


def run() -> list[dict[str, Any]]:
    ours: list[float] = []
    theirs: list[float] = []
    our_kib: list[float] = []
    their_kib: list[float] = []
    peer_name = "ADK peer unavailable"
    for _ in range(ROUNDS):
        seconds, _, per_kib = _start_waiting(WAITING_RUNS)
        ours.append(seconds)
        our_kib.append(per_kib)
        peer_seconds, peer_kib, peer_name = _adk_round(WAITING_RUNS)
        if peer_seconds is not None and peer_kib is not None:
            theirs.append(peer_seconds)
            their_kib.append(peer_kib)
    floors: list[float] = []
    _, starts, _ = _start_waiting(FLAT_RUNS, floors)
    first = statistics.fmean(starts[:BATCH]) * 1e3
    last = statistics.fmean(starts[-BATCH:]) * 1e3
    mine = statistics.median(ours)
    waiting = f"time to start {WAITING_RUNS} waiting agent runs"
    rows = [
        row(
            f"start: last {BATCH} of {FLAT_RUNS} waiting agent runs, mean",
            last,
            "ms",
            f"first {BATCH}",
            first,
            FLAT_GOAL,
        ),
        row(
            f"OS thread start with {FLAT_RUNS} waiting runs alive",
            floors[1],
            "ms",
            "with none",
            floors[0],
            None,
        ),
    ]
    memory = f"RSS per waiting agent run, {WAITING_RUNS} waiting"
    kib = statistics.median(our_kib)
    if theirs:
        rows.append(row(waiting, mine, "s", peer_name, statistics.median(theirs), ADK_GOAL))
        rows.append(row(memory, kib, "KiB", peer_name, statistics.median(their_kib), None))
    else:
        rows.append(row(f"{waiting} ({peer_name})", mine, "s", "itself", mine, None))
        rows.append(row(f"{memory} ({peer_name})", kib, "KiB", "itself", kib, None))
    return rows


if __name__ == "__main__":
    for item in run():
        print(item)
