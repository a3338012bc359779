"""Benchmark: durable runs — what journaling costs per step, and resuming 1,000 runs.

- journal per step: the two synced records a durable planning run writes for each
  callback (its `started` marker and its outcome, `RunJournal.step_started` +
  `step_completed`, fsync on) beside the floor of the same two lines appended with
  `os.write` + `os.fdatasync` to a file in the same directory;
- run per step, durable vs plain: the same 10-step planning run (real callback children,
  an echo executor) journaled and not; the figure is the durable run's time per callback,
  the floor the plain run's (the difference is what durability adds to a real step);
- resume 1,000 runs: 1,000 unfinished journals (each a 3-step run whose every callback
  completed, cut before its end record) resumed by a fresh runtime under its admission
  control (`resume_concurrency`, default 16) until every one has written its end — read,
  replayed (no callback runs again) and ended — beside the floor of 1,000 fsync'd appends
  of the end records alone.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.actors.runs.journal import JournalLimits, RunJournals
from phloem.supervision.refs import Owner
from tests.perf.common import median_seconds, row

JOURNAL_STEPS = 300
RUN_STEPS = 10
RUN_REPEAT = 3
RESUME_RUNS = 1000

ADAPTERS = {
    "planners": {"scripted": "tests.actors.planning.adapters:ScriptedPlanner"},
    "executors": {"scripted": "tests.actors.planning.adapters:ScriptedExecutor"},
}


def _adapters() -> AdapterRegistry:
    return AdapterRegistry.load(ADAPTERS["planners"], ADAPTERS["executors"])


def _planner(steps: int) -> dict[str, Any]:
    actions = [{"op": "echo", "value": i} for i in range(steps)]
    return {"name": "scripted", "target": {"steps": actions}}


def _journal_per_step(root: Path) -> list[dict[str, Any]]:
    journals = RunJournals(root / "j", "planning", JournalLimits())
    journal = journals.create(os.getuid(), "bench", {"goal": 1})
    outcome = {"answer": {"tag": "ok", "value": {"step": "s1", "value": 1}}, "failure": None}
    t0 = time.perf_counter()
    for n in range(1, JOURNAL_STEPS + 1):
        journal.step_started(n, {"call": "execute", "step_id": f"s{n}", "idempotent": True})
        journal.step_completed(n, outcome)
    ours = (time.perf_counter() - t0) / JOURNAL_STEPS
    lines = journal.path.read_bytes().splitlines(keepends=True)[1:]
    journal.close()
    fd = os.open(root / "raw.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    t0 = time.perf_counter()
    for line in lines:
        os.write(fd, line)
        os.fdatasync(fd)
    floor = (time.perf_counter() - t0) / JOURNAL_STEPS
    os.close(fd)
    return [
        row(
            "journal one step (2 synced records)",
            ours * 1e3,
            "ms",
            "2 os.write+os.fdatasync",
            floor * 1e3,
            None,
        )
    ]


def _run_per_step(root: Path) -> list[dict[str, Any]]:
    journals = RunJournals(root / "r", "planning", JournalLimits())
    rt = PlanningRuntime(_adapters(), name="bench-durable", journals=journals)
    owner = Owner.client("bench")
    callbacks = 1 + 2 * RUN_STEPS  # plan, then execute + review per step

    def one(durable: bool) -> None:
        result = rt.run(owner, _planner(RUN_STEPS), "scripted", 0, {}, {"durable": durable})
        assert result.status == "completed" and result.steps_executed == RUN_STEPS

    try:
        plain = median_seconds(lambda: one(False), repeat=RUN_REPEAT, warmup=1)
        durable = median_seconds(lambda: one(True), repeat=RUN_REPEAT, warmup=1)
    finally:
        rt.stop()
    return [
        row(
            f"durable {RUN_STEPS}-step run, per callback",
            durable / callbacks * 1e3,
            "ms",
            "the same run not durable",
            plain / callbacks * 1e3,
            None,
        )
    ]


def _resume(root: Path) -> list[dict[str, Any]]:
    journals = RunJournals(root / "s", "planning", JournalLimits())
    rt = PlanningRuntime(_adapters(), name="bench-durable-template", journals=journals)
    owner = Owner.client("bench")
    try:
        run = rt.start(owner, _planner(3), "scripted", 0, {}, {"durable": True})
        rt.await_result(owner, run, 60)
    finally:
        rt.stop()
    template = journals.path(run.durable_id).read_bytes().splitlines(keepends=True)
    body, end_line = b"".join(template[:-1]), template[-1]
    old = run.durable_id.encode()
    for i in range(RESUME_RUNS):
        new = f"drun_{i:032x}".encode()
        path = journals.path(new.decode())
        path.write_bytes(body.replace(old, new))
        os.chmod(path, 0o600)
    again = RunJournals(root / "s", "planning", JournalLimits(max_retained=RESUME_RUNS + 1))
    rt = PlanningRuntime(_adapters(), name="bench-durable-resume", journals=again)
    try:
        t0 = time.perf_counter()
        assert rt.resume_all() == RESUME_RUNS
        deadline = time.monotonic() + 600
        while again.retained < RESUME_RUNS + 1:  # + the template run, ended
            assert time.monotonic() < deadline, "resume did not finish"
            time.sleep(0.005)
        ours = time.perf_counter() - t0
    finally:
        rt.stop()
    fd = os.open(root / "ends.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    t0 = time.perf_counter()
    for _ in range(RESUME_RUNS):
        os.write(fd, end_line)
        os.fdatasync(fd)
    floor = time.perf_counter() - t0
    os.close(fd)
    return [
        row(
            f"resume {RESUME_RUNS} unfinished runs to their end",
            ours * 1e3,
            "ms",
            f"{RESUME_RUNS} fsync'd appends",
            floor * 1e3,
            None,
        )
    ]


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="phloem-bench-durable-", dir=".") as d:
        root = Path(d)
        return [*_journal_per_step(root), *_run_per_step(root), *_resume(root)]
