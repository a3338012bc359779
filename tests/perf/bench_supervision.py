"""Supervision benchmarks: in-process ask vs raw pykka ask; restart latency after a crash."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import pykka

from phloem.supervision import Actor, ChildSpec, Supervisor, SupervisorSpec, threadpark
from phloem.supervision.actor import ActorHandle
from tests.perf.common import median_seconds, row

RESTART_ROUNDS = 200
RESTART_TARGET = 1.5
_started = threading.Event()


class _Echo(Actor):
    def on_start(self) -> None:
        _started.set()

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise RuntimeError("crash")
        return message


class _RawEcho(pykka.ThreadingActor):
    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        return message


def _ask_round_trip() -> dict[str, Any]:
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("echo", _Echo)], name="bench")
    handle = sup.which_children()[0].ref
    assert isinstance(handle, ActorHandle)
    raw = _RawEcho.start()
    try:
        ours = median_seconds(lambda: handle.ask(1), 3000, warmup=200)
        floor = median_seconds(lambda: raw.ask(1), 3000, warmup=200)
    finally:
        raw.stop()
        sup.stop()
    return row("in-process ask round trip", ours * 1e6, "us", "raw pykka ask", floor * 1e6, 1.5)


def _restart_latency() -> list[dict[str, Any]]:
    """Crash -> restarted child answering, vs starting a fresh actor directly (a new
    thread: the floor the issue names), and vs a direct start handed a parked thread
    (`threadpark`: what a restart gets). Interleaved, one sample of each per round, so
    a change in load hits all three alike; medians."""
    sup = Supervisor.start(
        SupervisorSpec(intensity=10_000, period_s=1), [ChildSpec("echo", _Echo)], name="bench"
    )
    restarts: list[float] = []
    fresh: list[float] = []
    parked: list[float] = []
    keep: list[ActorHandle] = []  # alive to the end: each fresh start needs a new thread

    def start_direct(samples: list[float]) -> ActorHandle:
        _started.clear()
        t0 = time.perf_counter()
        handle = ActorHandle.start(_Echo)
        assert _started.wait(10)
        samples.append(time.perf_counter() - t0)
        return handle

    try:
        for _ in range(20):  # warm-up
            start_direct([]).kill()
        for _ in range(RESTART_ROUNDS):
            before = sup.which_children()[0].ref
            assert isinstance(before, ActorHandle)
            _started.clear()
            t0 = time.perf_counter()
            before.tell("crash")
            assert _started.wait(10)
            restarts.append(time.perf_counter() - t0)
            while sup.which_children()[0].ref in (None, before):
                time.sleep(0.0005)  # settle before the next round (not measured)
            while threadpark.parked_count():
                time.sleep(0.0005)  # no parked thread left: the next start makes one
            keep.append(start_direct(fresh))
            victim = start_direct([])
            victim.kill()
            while not threadpark.parked_count():
                time.sleep(0.0005)
            start_direct(parked).kill()
    finally:
        sup.stop()
        for handle in keep:
            handle.kill()
    ours = statistics.median(restarts) * 1e6
    return [
        row(
            "restart latency (crash -> restarted)",
            ours,
            "us",
            "direct actor start (new thread)",
            statistics.median(fresh) * 1e6,
            RESTART_TARGET,
        ),
        row(
            "restart latency (crash -> restarted)",
            ours,
            "us",
            "direct actor start on a parked thread",
            statistics.median(parked) * 1e6,
            None,
        ),
    ]


def run() -> list[dict[str, Any]]:
    return [_ask_round_trip(), *_restart_latency()]
