"""Whole agent runs beside google-adk's `Runner` (issue 31: the single-run and throughput
rows, and item 5's "runs/s at concurrency 64 >= at concurrency 1").

The same agent on both sides: an `LlmAgent` with one function tool (`add`) and a fake
model that calls it first and answers once the request holds its response, answering at
once (phloem's through `submit`, a future already done, as a model that never blocks
does; ADK's an async generator). phloem runs in an embedded `Tree` (`Tree.run_agent`:
start, follow the run's stream to its end, one call); ADK in `peer_adk.py` on one event
loop with an `InMemorySessionService`, a new session a run, in the throwaway venv of
`bench_starts.py`.

- one run: the median of `ONE_RUNS` runs, one after another.
- `RUNS` runs at concurrency 1 and `WIDE`: the wall time per run (phloem: that many
  threads each running runs; ADK: tasks behind a semaphore of that size).
Rounds (`ROUNDS`) interleave phloem and the peer; each figure is the median of the
rounds. Without the peer its rows say why and phloem's figures stand against themselves.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from concurrent.futures import Future
from typing import Any

from phloem import Tree
from phloem.agents import LlmAgent
from phloem.protocols.content import ModelRequest, ModelResponse, Part
from tests.perf.bench_starts import adk_command
from tests.perf.common import median_seconds, row

ONE_RUNS = int(os.environ.get("PHLOEM_BENCH_ONE_RUNS", "300"))
RUNS = int(os.environ.get("PHLOEM_BENCH_RUNS", "1000"))
WIDE = 64
ROUNDS = int(os.environ.get("PHLOEM_BENCH_RUNS_ROUNDS", "3"))
WIDE_GOAL = 1.0  # item 5: a run's share of the wall at 64 at most what it is at 1


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class ToolThenAnswer:
    """Calls `add` first; once the request holds its response, answers (at once)."""

    provider_name = "bench"

    def generate(self, request: ModelRequest) -> ModelResponse:
        last = request.contents[-1] if request.contents else None
        if last is not None and any(p.function_response is not None for p in last.parts):
            return ModelResponse.from_text("done")
        return ModelResponse.from_parts([Part.from_function_call("add", {"a": 1, "b": 2})])

    def submit(self, request: ModelRequest) -> Future[ModelResponse]:
        done: Future[ModelResponse] = Future()
        done.set_result(self.generate(request))
        return done


def _one(tree: Tree) -> None:
    run = tree.run_agent("tooler", input="go")
    if not run.ok or run.output != "done":
        raise RuntimeError(f"the bench run did not end as scripted: {run!r}"[:300])


def _wall_per_run(tree: Tree, concurrency: int) -> float:
    """Seconds of wall time per run for `RUNS` runs, `concurrency` threads running them."""
    left = iter(range(RUNS))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            try:
                _one(tree)
            except BaseException as exc:  # reported below: a bench never hides a failure
                errors.append(exc)
                return

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return (time.perf_counter() - t0) / RUNS


def _peer(*args: str) -> tuple[float | None, str]:
    try:
        result = adk_command(*args)
    except Exception as exc:  # the peer is optional: its rows say why it is missing
        return None, f"ADK peer unavailable ({type(exc).__name__}: {exc})"[:200]
    return float(result["seconds"]), f"google-adk {result['version']} Runner, one event loop"


def run() -> list[dict[str, Any]]:
    ours: dict[str, list[float]] = {"one": [], "narrow": [], "wide": []}
    theirs: dict[str, list[float]] = {"one": [], "narrow": [], "wide": []}
    peer_name = "ADK peer unavailable"
    with Tree.start(None, name="bench-runs") as tree:
        tree.register_agent(LlmAgent("tooler", "", ToolThenAnswer(), tools=[add]))
        for _ in range(ROUNDS):
            ours["one"].append(median_seconds(lambda: _one(tree), ONE_RUNS))
            ours["narrow"].append(_wall_per_run(tree, 1))
            ours["wide"].append(_wall_per_run(tree, WIDE))
            for key, args in (
                ("one", ("one_run", str(ONE_RUNS))),
                ("narrow", ("runs", str(RUNS), "1")),
                ("wide", ("runs", str(RUNS), str(WIDE))),
            ):
                seconds, peer_name = _peer(*args)
                if seconds is not None:
                    theirs[key].append(seconds / (1 if key == "one" else RUNS))
    mine = {key: statistics.median(v) * 1e3 for key, v in ours.items()}
    labels = {
        "one": "one agent run (fake model, one function tool), embedded tree",
        "narrow": f"{RUNS} agent runs at concurrency 1, wall per run",
        "wide": f"{RUNS} agent runs at concurrency {WIDE}, wall per run",
    }
    rows = []
    for key, label in labels.items():
        if theirs[key]:
            peer = statistics.median(theirs[key]) * 1e3
            rows.append(row(label, mine[key], "ms", peer_name, peer, None))
        else:
            rows.append(row(f"{label} ({peer_name})", mine[key], "ms", "itself", mine[key], None))
    rows.append(
        row(
            f"{RUNS} agent runs at concurrency {WIDE}, wall per run",
            mine["wide"],
            "ms",
            "the same at concurrency 1",
            mine["narrow"],
            WIDE_GOAL,
        )
    )
    return rows


if __name__ == "__main__":
    for item in run():
        print(item)
