"""Supervision benchmarks: in-process ask vs raw pykka ask; restart latency after a crash."""

from __future__ import annotations

import threading
import time
from typing import Any

import pykka

from phloem.supervision import Actor, ChildSpec, Supervisor, SupervisorSpec
from phloem.supervision.actor import ActorHandle
from tests.perf.common import median_seconds, row

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


def _restart_latency() -> dict[str, Any]:
    """Crash → restarted child answering, vs starting a fresh actor directly."""
    sup = Supervisor.start(
        SupervisorSpec(intensity=10_000, period_s=1), [ChildSpec("echo", _Echo)], name="bench"
    )
    samples = []
    try:
        for _ in range(200):
            before = sup.which_children()[0].ref
            assert isinstance(before, ActorHandle)
            _started.clear()
            t0 = time.perf_counter()
            before.tell("crash")
            assert _started.wait(10)
            samples.append(time.perf_counter() - t0)
            while sup.which_children()[0].ref in (None, before):
                time.sleep(0.0005)  # settle before the next round (not measured)
    finally:
        sup.stop()
    samples.sort()
    ours = samples[len(samples) // 2]

    handles: list[ActorHandle] = []

    def fresh() -> None:
        _started.clear()
        handles.append(ActorHandle.start(_Echo))
        assert _started.wait(10)

    floor = median_seconds(fresh, 200)
    for h in handles:
        h.kill()
    return row(
        "restart latency (crash -> restarted)",
        ours * 1e6,
        "us",
        "direct actor start",
        floor * 1e6,
        None,
    )


def run() -> list[dict[str, Any]]:
    return [_ask_round_trip(), _restart_latency()]
