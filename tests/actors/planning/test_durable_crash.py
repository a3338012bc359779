"""The crash test of durable runs: 100 durable planning runs of 5 steps each, the daemon
killed with SIGKILL at random points 20 times; after the last restart every run ends as
an uncrashed run would, and the executor's own record of every execution shows the
rules held: a non-idempotent step never ran twice, and an idempotent one ran again only
after a crash it was in flight for (one more run per such crash at most).

A run whose non-idempotent step was in flight at a kill ends `failed` with `interrupted`
naming that step (the at-most-once rule), never re-running it; every other run ends
`completed` with the same result as an uncrashed run.
"""

from __future__ import annotations

import itertools
import random
import shutil
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

import phloem
from tests.actors.planning.durable_adapters import value_of
from tests.helpers import DaemonProc, short_tmpdir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RUNS = 100
STEPS = 5
KILLS = 20
NON_IDEMPOTENT = [2, 4]  # in every other run


def durable_config(journals: Path, resume_concurrency: int = 100) -> str:
    return f"""
[planning]
durable = true
journal_dir = "{journals}"
resume_concurrency = {resume_concurrency}
[planning.planners]
d = "tests.actors.planning.durable_adapters:DurablePlanner"
[planning.executors]
d = "tests.actors.planning.durable_adapters:LoggingExecutor"
"""


def goal(key: int, log: Path) -> dict[str, object]:
    g: dict[str, object] = {"key": key, "steps": STEPS, "log": str(log)}
    if key % 2:
        g["non_idempotent"] = NON_IDEMPOTENT
    return g


def test_one_hundred_runs_survive_twenty_kill_9s() -> None:
    rng = random.Random(32)
    d = short_tmpdir()
    log = d / "executions.log"
    config = d / "phloem.toml"
    config.write_text(durable_config(d / "journals"))
    socket = d / "run" / "phloem.sock"
    env = {"XDG_STATE_HOME": str(d / "state")}
    started = time.monotonic()
    try:
        daemon = DaemonProc(socket, config, env=env).wait_ready()
        with phloem.Client.connect(socket) as client:
            ids = {
                key: client.start_planning_run("d", "d", goal(key, log), {"sleep_s": 0.05}).run_id
                for key in range(RUNS)
            }
        assert all(i.startswith("drun_") for i in ids.values())
        kills: list[float] = []
        errors: list[str] = []
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.05, 0.6))
            kills.append(time.time())
            daemon.stop(signal.SIGKILL)
            errors += [line for line in daemon.lines if '"level": "error"' in line]
            daemon = DaemonProc(socket, config, env=env).wait_ready()
        restarted = time.monotonic() - started
        try:
            with phloem.Client.connect(socket) as client:
                results = {}
                for key, run_id in ids.items():
                    started_run = client.attach_planning(run_id)
                    assert started_run.run_id == run_id
                    results[key] = client.await_planning(started_run.ref, timeout=240)
        finally:
            assert daemon.stop() == 0, "".join(daemon.lines)
        errors += [line for line in daemon.lines if '"level": "error"' in line]
        assert not errors, "".join(errors)

        executions: dict[tuple[int, str], list[float]] = defaultdict(list)
        for line in log.read_text().splitlines():
            key, step, _pid, at = line.split()
            executions[(int(key), step)].append(float(at))

        interrupted = 0
        for key, result in results.items():
            idempotent = {f"s{n}": (n not in NON_IDEMPOTENT or key % 2 == 0) for n in range(1, 6)}
            if result.status == "completed":
                assert result.result == value_of(key, STEPS)
                assert result.steps_executed == STEPS
                assert all((key, f"s{n}") in executions for n in range(1, 6))  # at least once
            else:
                assert result.error is not None and result.error.kind == "interrupted", result
                step_id = result.error.reason["step_id"]  # type: ignore[index]
                assert not idempotent[step_id]
                # the marker was synced before the step began: it began once, or never
                assert len(executions[(key, step_id)]) <= 1
                interrupted += 1
            for step_id, once in idempotent.items():
                times = executions.get((key, step_id), [])
                if not once:
                    assert len(times) <= 1, f"non-idempotent {key}/{step_id} ran {len(times)}"
                    continue
                # each run again needs a kill between it and the run before it
                for first, again in itertools.pairwise(times):
                    assert any(first <= k <= again for k in kills), (key, step_id, times, kills)
                assert len(times) <= 1 + len(kills)
        reruns = sum(len(t) - 1 for t in executions.values())
        took = time.monotonic() - started
        print(
            f"\n{RUNS} durable runs, {KILLS} kill -9s: {RUNS - interrupted} completed, "
            f"{interrupted} interrupted, {reruns} idempotent re-executions, {took:.1f} s "
            f"({restarted:.1f} s to the last restart)"
        )
    finally:
        shutil.rmtree(d, ignore_errors=True)
