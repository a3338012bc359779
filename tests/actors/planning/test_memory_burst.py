"""A planner callback whose forked helpers fill their memory at once, in parallel: the
tree's peak stays within `GOAL` (1.5) times its cap, measured by the test itself (PSS),
independently of the watchdog. The tree maps at most `treebudget.MAX_BURST_FACTOR`
(1.25) times its cap; the rest of the goal is room for what grows without a mapping."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.supervision.proctree import pss_of, tree_of
from phloem.supervision.refs import Owner
from phloem.supervision.treebudget import MAX_BURST_FACTOR
from tests.actors.planning.conftest import read_pids

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024
CAP = 128 * MIB
HELPERS = 8
HELPER_BYTES = 96 * MIB  # each alone under the cap; together 6 times over it
CHUNK = 2 * MIB  # under the smallest share at the cap, (1.25 - 1) * CAP / 9 members: so
# the tree cannot stall under its cap with every member's next block refused
GOAL = 1.5
SAMPLE_S = 0.005


class TreeSampler:
    """Sums the PSS of a tree on a thread of its own, as often as it can but at most every
    `SAMPLE_S` seconds (a reading of 9 processes takes longer under load); `peak`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            members = tree_of([self.pid])
            total = sum(pss_of(p) or 0 for p in members)
            self.peak = max(self.peak, total)
            self.samples += 1
            if not os.path.exists(f"/proc/{self.pid}"):
                return
            time.sleep(SAMPLE_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def test_helpers_filling_memory_in_parallel_overshoot_the_cap_at_most_one_and_a_half_times(
    adapters: AdapterRegistry, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    target = {"plan": "burst_hogs", "helpers": HELPERS, "size": HELPER_BYTES, "chunk": CHUNK}
    rt = PlanningRuntime(adapters, name="planning-burst")
    try:
        owner = Owner.client("burst")
        ref = rt.start(
            owner,
            {"name": "scripted", "target": {**target, "fifo": fifo}},
            "scripted",
            {"task": "t"},
            None,
            {"max_memory_bytes": CAP},
        )
        [pid] = read_pids(fifo)
        sampler = TreeSampler(pid)
        result = rt.await_result(owner, ref, 60)
        sampler.stop()
    finally:
        rt.stop()
    bound = GOAL * CAP
    print(
        f"\nburst: {HELPERS} helpers x {HELPER_BYTES // MIB} MiB; tree peak (PSS, "
        f"{sampler.samples} samples) {sampler.peak / MIB:.0f} MiB against cap "
        f"{CAP // MIB} MiB: {sampler.peak / CAP:.2f}x (goal {GOAL}x = {bound / MIB:.0f} MiB; "
        f"mapped at most {MAX_BURST_FACTOR}x)"
    )
    assert result.error is not None, result.status
    assert result.error.to_builtins() == {
        "kind": "planner_callback_failed",
        "reason": "callback_memory_exceeded",
    }
    assert sampler.peak <= bound, f"peak {sampler.peak} over {bound}"
