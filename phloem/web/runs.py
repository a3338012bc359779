"""The Runs page's data: the tree's record of recent runs, kept up to date as it changes.

The web view follows the daemon's `runs` service (`client.follow_runs()`): the record at
the start, then every change — a run began, noted an event, finished, was forgotten — as
it happens, so every run shows, however short, with its events (`plan_accepted`,
`step_started`, tool calls, cases) and its outcome. No sampling: nothing is inferred
from tree snapshots. The record is content-free (ids, names, counts, error kinds).

Bounds: `MAX_RUNS` runs shown (the oldest ended one goes first), `MAX_RUN_EVENTS` events
each (the oldest go first, counted).
"""

from __future__ import annotations

from collections import OrderedDict

import msgspec

from phloem.protocols.runs import (
    RunBegan,
    RunFinished,
    RunForgotten,
    RunMissed,
    RunNoted,
    RunSummary,
    RunUpdate,
)

MAX_RUNS = 200
MAX_RUN_EVENTS = 100


class RunBoard:
    """The runs the page shows: the record, with each `RunUpdate` folded in."""

    def __init__(self) -> None:
        self.runs: OrderedDict[str, RunSummary] = OrderedDict()
        self.missed = False  # updates were lost: read the whole record again

    def reset(self, runs: list[RunSummary]) -> None:
        self.runs = OrderedDict((r.id, _bounded(r)) for r in runs[-MAX_RUNS:])
        self.missed = False

    def apply(self, update: RunUpdate) -> None:
        if isinstance(update, RunBegan):
            self.runs[update.run.id] = _bounded(update.run)
            while len(self.runs) > MAX_RUNS:
                victim = next((k for k, r in self.runs.items() if r.outcome is not None), None)
                self.runs.pop(victim if victim is not None else next(iter(self.runs)))
        elif isinstance(update, RunNoted):
            run = self.runs.get(update.id)
            if run is not None:
                events = [*run.events, update.note]
                self.runs[update.id] = _bounded(
                    msgspec.structs.replace(run, events=events, event_count=run.event_count + 1)
                )
        elif isinstance(update, RunFinished):
            run = self.runs.get(update.id)
            if run is not None:
                self.runs[update.id] = msgspec.structs.replace(
                    run, ended_at=update.ended_at, outcome=update.outcome, error=update.error
                )
        elif isinstance(update, RunForgotten):
            self.runs.pop(update.id, None)
        elif isinstance(update, RunMissed):
            self.missed = True

    def views(self) -> list[RunSummary]:
        """Running runs (newest first), then ended ones (most recently ended first)."""
        running = [r for r in self.runs.values() if r.outcome is None]
        ended = [r for r in self.runs.values() if r.outcome is not None]
        running.sort(key=lambda r: r.started_at, reverse=True)
        ended.sort(key=lambda r: r.ended_at or 0.0, reverse=True)
        return running + ended


def _bounded(run: RunSummary) -> RunSummary:
    over = len(run.events) - MAX_RUN_EVENTS
    if over <= 0:
        return run
    return msgspec.structs.replace(
        run, events=run.events[over:], events_dropped=run.events_dropped + over
    )
