"""Progress events of a planning run, streamed to subscribers under credit.

Kinds, in the order a run produces them: `plan_accepted` (data: the plan),
`step_started` (plan_id, revision, step_id, attempt), `observation` (the observation),
`replan` (the new plan), and exactly one `terminal` (status and error). Every payload is
secret-pruned JSON data; `seq` counts from 1 within a run.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

EventKind = Literal["plan_accepted", "step_started", "observation", "replan", "terminal"]

# Credit window a subscriber gets unless it asks for another.
DEFAULT_EVENT_WINDOW_MESSAGES = 64
DEFAULT_EVENT_WINDOW_BYTES = 8 * 1024 * 1024


class PlanningEvent(msgspec.Struct, frozen=True):
    """One progress event of the run `run` (its ref text is never included)."""

    seq: int
    kind: EventKind
    data: dict[str, Any]


def event_size(event: PlanningEvent) -> int:
    """Credit cost of an event: its JSON size plus a fixed envelope overhead."""
    return 64 + len(msgspec.json.encode(event.data))
