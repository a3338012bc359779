"""Planning benchmarks: the cost of isolating every callback, throughput, memory per run.

- one executor callback through `CallbackRunner` (capped child from the fork server,
  request, checked answer, child reaped) vs (a) a raw fork-server child round trip
  (start, one channel message, exit) and (b) the same callback called in-process;
- steps per second with 100 concurrent runs (each step = one executor and one planner
  callback) vs raw child round trips per second from 100 threads;
- resident memory of the runtime per active run (100 runs, each waiting in a callback) vs
  per idle supervised actor.
"""

from __future__ import annotations

import gc
import operator
import os
import select
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.actors.planning.callbacks import CallbackOutcome, CallbackRunner
from phloem.actors.planning.outcomes import OkOutcome
from phloem.actors.planning.worker import CallbackRequest, ExecuteCall, invoke
from phloem.protocols.jsonvalue import canonical_json
from phloem.protocols.plan import Step
from phloem.supervision import Actor, ChildSpec, Supervisor, SupervisorSpec
from phloem.supervision.process import start_process
from phloem.supervision.refs import Owner
from phloem.supervision.spec import Limits, ProcessTarget, Strategy
from tests.perf.common import row

EXECUTOR = "tests.actors.planning.adapters:ScriptedExecutor"
PLANNER = "tests.actors.planning.adapters:ScriptedPlanner"
MEMORY = 256 * 1024 * 1024
REQUEST = canonical_json(
    CallbackRequest(
        "executor",
        EXECUTOR,
        ExecuteCall(target=None, step=Step("s", "d", {"op": "echo"}), context={}),
    )
)


# `channel.send(REQUEST)` as a callable the fork server already has (operator is builtin),
# so the raw child imports nothing.
_ECHO = operator.methodcaller("send", REQUEST)


def _raw_round_trip() -> None:
    handle = start_process(
        ProcessTarget(_ECHO, pass_channel=True),
        name="bench-raw",
        limits=Limits(max_memory_bytes=MEMORY),
    )
    handle.recv(10)
    if handle.wait(1.0) is None:
        handle.stop(0)


def _callback_round_trip(runner: CallbackRunner) -> None:
    done = threading.Event()
    box: list[CallbackOutcome] = []

    def on_done(outcome: CallbackOutcome) -> None:
        box.append(outcome)
        done.set()

    runner.start(REQUEST, 10.0, MEMORY, on_done)
    done.wait(10)
    assert box and isinstance(box[0].answer, OkOutcome), box


def _median(fn: Any, n: int, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _per_callback() -> list[dict[str, Any]]:
    runner = CallbackRunner()
    raw = _median(_raw_round_trip, 60)
    ours = _median(lambda: _callback_round_trip(runner), 60)
    inproc = _median(lambda: invoke(REQUEST), 2000, warmup=100)
    return [
        row(
            "planning executor callback (isolated child)",
            ours * 1e3,
            "ms",
            "raw fork-server child round trip",
            raw * 1e3,
            2.0,
        ),
        row(
            "planning executor callback (isolated child)",
            ours * 1e3,
            "ms",
            "same callback in-process",
            inproc * 1e3,
            None,
        ),
    ]


def _throughput(rt: PlanningRuntime) -> dict[str, Any]:
    runs, steps = 100, 4
    planner = {"name": "scripted", "target": {"steps": [{"op": "echo"}] * steps}}
    owners = [Owner.client(f"bench-{i}") for i in range(runs)]
    t0 = time.perf_counter()
    refs = [rt.start(o, planner, "scripted", i) for i, o in enumerate(owners)]
    results = [rt.await_result(o, r, 120) for o, r in zip(owners, refs, strict=True)]
    elapsed = time.perf_counter() - t0
    assert all(r.status == "completed" for r in results)
    steps_per_s = runs * steps / elapsed

    count = 300
    t0 = time.perf_counter()

    def round_trips() -> None:
        for _ in range(count // 100):
            _raw_round_trip()

    threads = [threading.Thread(target=round_trips) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raw_per_s = count / (time.perf_counter() - t0)
    return row(
        "planning steps/s, 100 concurrent runs",
        steps_per_s,
        "steps/s",
        "raw child round trips/s from 100 threads, / 2 (a step is 2 callbacks)",
        raw_per_s / 2,
        None,
        higher_is_better=True,
    )


class _Idle(Actor):
    pass


def _rss_per_run(rt: PlanningRuntime) -> dict[str, Any]:
    proc = psutil.Process()
    runs = 100
    with tempfile.TemporaryDirectory() as tmp:
        fifos = []
        owner = Owner.client("bench-rss")
        gc.collect()
        before = proc.memory_info().rss
        refs = []
        for i in range(runs):
            fifo = str(Path(tmp) / f"f{i}")
            os.mkfifo(fifo)
            fifos.append(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
            target = {"steps": [{"op": "sleep", "s": 60, "fifo": fifo}]}
            refs.append(rt.start(owner, {"name": "scripted", "target": target}, "scripted", i))
        for fd in fifos:  # every run is now waiting inside its executor callback
            select.select([fd], [], [], 30)
        gc.collect()
        during = proc.memory_info().rss
        for ref in refs:
            rt.cancel(owner, ref)
        for fd in fifos:
            os.close(fd)
    per_run = (during - before) / runs

    sup = Supervisor.start(SupervisorSpec(Strategy.ONE_FOR_ONE), [], name="bench-idle")
    gc.collect()
    before = proc.memory_info().rss
    for i in range(runs):
        sup.start_child(ChildSpec(f"idle-{i}", _Idle))
    gc.collect()
    per_actor = (proc.memory_info().rss - before) / runs
    sup.stop()
    return row(
        "runtime RSS per active run",
        per_run / 1024,
        "KiB",
        "RSS per idle supervised actor",
        max(per_actor, 1.0) / 1024,
        None,
    )


def run() -> list[dict[str, Any]]:
    adapters = AdapterRegistry.load({"scripted": PLANNER}, {"scripted": EXECUTOR})
    rt = PlanningRuntime(adapters, name="bench-planning")
    try:
        rows = _per_callback()
        rows.append(_throughput(rt))
        rows.append(_rss_per_run(rt))
    finally:
        rt.stop()
    return rows


if __name__ == "__main__":
    for item in run():
        print(item)
