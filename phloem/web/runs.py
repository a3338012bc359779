"""Active runs and their events, as the supervision tree shows them.

Every planning run, agent run and eval is a child of a `runs` supervisor in the tree
(`planning/runs`, `agents/runs`, `eval/runs`), with its driver and one child per
sub-agent invocation or case run under it. `RunTracker.update(snapshot)` compares each
snapshot with the last one and turns what changed into events: the run started, changed
state, restarted, a child (a step) started or ended, the run ended. These are
content-free, like telemetry: ids and states, never inputs, outputs or prompts (a run's
own event stream is bound to the client that started it, and stays so).

Bounds: `MAX_RUN_EVENTS` events kept a run (the oldest dropped first, counted),
`MAX_ENDED_RUNS` ended runs kept, `MAX_ACTIVE_RUNS` active runs followed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_RUN_EVENTS = 100
MAX_ENDED_RUNS = 20
MAX_ACTIVE_RUNS = 1000
RUNS_SUPERVISOR_ID = "runs"


@dataclass
class RunView:
    """One run as the page shows it."""

    key: str  # e.g. `agents/runs/agent-run:3`
    service: str
    id: str
    started_at: float
    state: str = "running"
    restarts: int = 0
    children: set[str] = field(default_factory=set)
    ended_at: float | None = None
    events: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=MAX_RUN_EVENTS))
    events_dropped: int = 0

    def add(self, at: float, text: str) -> None:
        if len(self.events) == MAX_RUN_EVENTS:
            self.events_dropped += 1
        self.events.append((at, text))


def _runs_in(node: dict[str, Any], path: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """`(service, key, run node)` for every run under `node` (iterative: depth-bounded
    by the snapshot itself, which follows at most 64 levels)."""
    stack = [(node, path)]
    while stack:
        current, where = stack.pop()
        for child in current.get("children", ()):
            child_path = f"{where}/{child['id']}"
            if child["id"] == RUNS_SUPERVISOR_ID and child.get("type") == "supervisor":
                service = current["id"]
                for run in child.get("children", ()):
                    yield service, f"{child_path}/{run['id']}", run
            else:
                stack.append((child, child_path))


class RunTracker:
    """Diffs successive tree snapshots (as JSON-ready dicts) into run events."""

    def __init__(self) -> None:
        self.active: dict[str, RunView] = {}
        self.ended: deque[RunView] = deque(maxlen=MAX_ENDED_RUNS)

    def update(self, snapshot: dict[str, Any], now: float | None = None) -> bool:
        """Fold one snapshot in; whether anything changed."""
        at = time.time() if now is None else now
        seen: set[str] = set()
        changed = False
        for root in snapshot.get("roots", ()):
            for service, key, node in _runs_in(root, root["id"]):
                seen.add(key)
                changed |= self._one(service, key, node, at)
        for key in [k for k in self.active if k not in seen]:
            run = self.active.pop(key)
            for child in sorted(run.children):
                run.add(at, f"step ended: {child}")
            run.children = set()
            run.ended_at = at
            run.state = "ended"
            run.add(at, "ended")
            self.ended.appendleft(run)
            changed = True
        return changed

    def _one(self, service: str, key: str, node: dict[str, Any], at: float) -> bool:
        run = self.active.get(key)
        children = {c["id"] for c in node.get("children", ())}
        if run is None:
            if len(self.active) >= MAX_ACTIVE_RUNS:
                return False
            run = RunView(key, service, node["id"], at, node["state"], node.get("restarts", 0))
            run.add(at, f"started ({node['state']})")
            self.active[key] = run
            for child in sorted(children):
                run.add(at, f"step started: {child}")
            run.children = children
            return True
        changed = False
        if node["state"] != run.state:
            run.add(at, f"state: {node['state']}")
            run.state = node["state"]
            changed = True
        if node.get("restarts", 0) != run.restarts:
            run.restarts = node.get("restarts", 0)
            run.add(at, f"restarted ({run.restarts})")
            changed = True
        for child in sorted(children - run.children):
            run.add(at, f"step started: {child}")
            changed = True
        for child in sorted(run.children - children):
            run.add(at, f"step ended: {child}")
            changed = True
        run.children = children
        return changed

    def views(self) -> list[RunView]:
        """Active runs (newest first), then ended ones (most recently ended first)."""
        active = sorted(self.active.values(), key=lambda r: r.started_at, reverse=True)
        return active + list(self.ended)
