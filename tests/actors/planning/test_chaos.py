"""Planning runs under SIGKILL chaos: a killer thread kills fork servers and callback
children at random moments while runs go on. A fork server's death costs only the
callbacks it held (a planner callback lost with it is asked again once), so nearly every
run completes."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.supervision.forkserver import server_pid
from phloem.supervision.proctree import children_of, kill_all
from phloem.supervision.refs import Owner

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

RUNS = 300
CONCURRENT = 4
KILL_AFTER_RUNS = (6, 18)  # a kill once every so many ended runs (so: whatever the load)
KILL_DELAY_S = (0.0, 0.2)  # at a random moment after that
CHILD_WAIT_S = 1.0  # a child kill waits this long at most for a callback to be running
SERVER_SHARE = 0.5  # of the kills, how many go to the fork server
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

    def _run(self) -> None:
        mark = 0
        while True:
            mark += self.random.randint(*KILL_AFTER_RUNS)
            with self._cond:
                self._cond.wait_for(lambda m=mark: self._stop or self.ended >= m)
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


@pytest.fixture
def chaos_runtime(adapters: AdapterRegistry) -> Iterator[PlanningRuntime]:
    rt = PlanningRuntime(adapters, name="planning-chaos")
    assert rt.run(Owner.client("warm-up"), "scripted", "scripted", 0).status == "completed"
    yield rt
    rt.stop()


def test_runs_complete_while_fork_servers_and_callback_children_are_killed(
    chaos_runtime: PlanningRuntime,
) -> None:
    ends: Counter[str] = Counter()
    lock = threading.Lock()
    todo = iter(range(RUNS))

    def runner() -> None:
        owner = Owner.client(f"chaos-{threading.get_ident()}")
        while True:
            with lock:
                if next(todo, None) is None:
                    return
            result = chaos_runtime.run(owner, PLANNER, "scripted", {"task": "t"})
            end = result.status
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
