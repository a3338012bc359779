"""The planning service's messages: what a client and the `planning` service exchange.

These are not a document format of the outside world: they are the requests a client
(`phloem.client.planning`) asks the service actor (`service`) with, and its replies.
`AwaitPlanning` is answered with the result's canonical JSON (`phloem.protocols.result`).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

__all__ = [
    "AwaitPlanning",
    "CancelPlanning",
    "OpenPlanningEvents",
    "PlanningCancelled",
    "PlanningRequest",
    "PlanningStarted",
    "StartPlanning",
]


class OpenPlanningEvents(msgspec.Struct, frozen=True, tag="open_events"):
    """Open an owner-bound event topic for a run about to start; the reply is its name."""


class StartPlanning(msgspec.Struct, frozen=True, tag="start"):
    """Start a run. Adapters are configured names or `{name, target, config}` mappings.

    `events` names a topic from `OpenPlanningEvents` that receives the run's events.
    """

    planner: Any
    executor: Any
    goal: Any = None
    context: Any = None
    options: dict[str, Any] | None = None
    events: str | None = None


class AwaitPlanning(msgspec.Struct, frozen=True, tag="await"):
    """Wait up to `timeout_s` (None: until it ends) for the run's result."""

    ref: Any
    timeout_s: float | None = None


class CancelPlanning(msgspec.Struct, frozen=True, tag="cancel"):
    """Cancel the run; its result becomes `cancelled` with the (redacted) `reason`."""

    ref: Any
    reason: Any = "user_cancelled"


PlanningRequest: TypeAlias = OpenPlanningEvents | StartPlanning | AwaitPlanning | CancelPlanning


class PlanningStarted(msgspec.Struct, frozen=True):
    """The reply to `StartPlanning`: the run's opaque, owner-bound ref."""

    ref: str


class PlanningCancelled(msgspec.Struct, frozen=True):
    """The reply to `CancelPlanning`: False if the run had already ended."""

    cancelled: bool
