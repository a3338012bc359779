"""Planning runs in an embedded tree, through its clients, under SIGKILL chaos: a killer
thread kills fork servers and callback children at random moments while runs go on. A
fork server's death costs only the callbacks it held (a planner callback lost with it is
asked again once), so nearly every run completes."""

from __future__ import annotations

import functools
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

import phloem
from phloem.config import parse_config
from phloem.supervision.forkserver import server_pid
from phloem.supervision.proctree import children_of, kill_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

RUNS = 300
CONCURRENT = 6
KILL_AFTER_RUNS = (4, 12)  # a kill once every so many ended runs (so: whatever the load)
KILL_DELAY_S = (0.0, 0.2)  # at a random moment after that
CHILD_WAIT_S = 1.0  # a child kill waits this long at most for a callback to be running
SERVER_SHARE = 0.8  # of the kills, how many go to the fork server
COMPLETION_FLOOR = 0.95
PLANNER = {
    "name": "scripted",
    "target": {
        "steps": [{"op": "echo", "value": 1}, {"op": "echo", "value": 2}],
        "review": "replan_on_error",  # a killed executor step is planned again
        "recovery": [{"op": "echo", "value": 3}],
    },
}
CALLBACK_TITLES = (b"planner.", b"executor.")


def _callback_children(server: int) -> list[int]:
    """The fork server's children that run a callback now (not its idle pool)."""
    out = []
    for pid in children_of(server):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read()
        except OSError:
            continue
        if any(t in title for t in CALLBACK_TITLES):
            out.append(pid)
    return out


class Killer:
    """SIGKILLs the fork server or one of its callback children at a random moment once
    every `KILL_AFTER_RUNS` ended runs."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.kills: Counter[str] = Counter()
        self.ended = 0
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="chaos-killer", daemon=True)
        self._thread.start()

    def run_ended(self) -> None:
        with self._cond:
            self.ended += 1
            self._cond.notify_all()

    def _due(self, mark: int) -> bool:
        return self._stop or self.ended >= mark

    def _run(self) -> None:
        mark = 0
        while True:
            mark += self.random.randint(*KILL_AFTER_RUNS)
            with self._cond:
                self._cond.wait_for(functools.partial(self._due, mark))
                if self._stop:
                    return
            time.sleep(self.random.uniform(*KILL_DELAY_S))
            self._kill(self.random.random() < SERVER_SHARE)

    def _kill(self, server_kill: bool) -> None:
        deadline = time.monotonic() + CHILD_WAIT_S
        while (server := server_pid()) is None:
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)
        if server_kill:
            kill_all([server], signal.SIGKILL)
            self.kills["fork server"] += 1
            return
        while not (children := _callback_children(server)):
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)
        kill_all([self.random.choice(children)], signal.SIGKILL)
        self.kills["callback child"] += 1

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(10)


CONFIG = """
[planning.planners]
scripted = "tests.actors.planning.adapters:ScriptedPlanner"
[planning.executors]
scripted = "tests.actors.planning.adapters:ScriptedExecutor"
"""


@pytest.fixture
def tree() -> Iterator[phloem.Tree]:
    with phloem.Tree.start(parse_config(CONFIG), name="planning-chaos") as tree:
        with tree.client("warm-up") as client:
            assert client.run_planning("scripted", "scripted", 0).status == "completed"
        yield tree


def test_runs_complete_while_fork_servers_and_callback_children_are_killed(
    tree: phloem.Tree,
) -> None:
    ends: Counter[str] = Counter()
    lock = threading.Lock()
    todo = iter(range(RUNS))

    def runner() -> None:
        with tree.client("chaos") as client:
            while True:
                with lock:
                    if next(todo, None) is None:
                        return
                result = client.run_planning(PLANNER, "scripted", {"task": "t"})
                end: str = result.status
                if result.error is not None:
                    end += f" {result.error.kind}: {result.error.reason}"
                with lock:
                    ends[end] += 1
                killer.run_ended()

    started = time.monotonic()
    killer = Killer(seed=28)
    threads = [threading.Thread(target=runner) for _ in range(CONCURRENT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(200)
    killer.stop()
    elapsed = time.monotonic() - started
    completed = ends["completed"]
    rate = completed / RUNS
    print(
        f"\nchaos: {completed} of {RUNS} runs completed ({rate:.1%}, floor "
        f"{COMPLETION_FLOOR:.0%}) in {elapsed:.0f} s; kills {dict(killer.kills)}; "
        f"ends {dict(ends)}"
    )
    assert sum(ends.values()) == RUNS, "a run did not end"
    assert killer.kills["fork server"] > 0, "the killer never hit a fork server"
    assert rate >= COMPLETION_FLOOR, dict(ends)
