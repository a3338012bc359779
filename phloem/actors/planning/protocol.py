"""The planning service's messages: what a client and the `planning` service exchange.

These are not a document format of the outside world: they are the requests a client
(`phloem.client.planning`) asks the service actor (`service`) with, and its replies.
`AwaitPlanning` is answered with the result's canonical JSON (`phloem.protocols.result`).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from phloem.protocols.runs import run_item_type

__all__ = [
    "AwaitPlanning",
    "CancelPlanning",
    "PlanningCancelled",
    "PlanningRequest",
    "PlanningStarted",
    "StartPlanning",
]


class StartPlanning(msgspec.Struct, frozen=True, tag="start"):
    """Start a run. Adapters are configured names or `{name, target, config}` mappings."""

    planner: Any
    executor: Any
    goal: Any = None
    context: Any = None
    options: dict[str, Any] | None = None


class AwaitPlanning(msgspec.Struct, frozen=True, tag="await"):
    """Wait up to `timeout_s` (None: until it ends) for the run's result."""

    ref: Any
    timeout_s: float | None = None


class CancelPlanning(msgspec.Struct, frozen=True, tag="cancel"):
    """Cancel the run; its result becomes `cancelled` with the (redacted) `reason`."""

    ref: Any
    reason: Any = "user_cancelled"


PlanningRequest: TypeAlias = StartPlanning | AwaitPlanning | CancelPlanning


class PlanningStarted(msgspec.Struct, frozen=True):
    """The reply to `StartPlanning`: the run's opaque, owner-bound ref, and its stream of
    `phloem.protocols.runs` items (`PlanningStreamItem`)."""

    ref: str
    stream: str


PlanningStreamItem = run_item_type(dict[str, Any], str)
"""A planning run's stream: `RunEvent`s whose `kind` is `plan_accepted`, `step_started`
(`plan_id`, `revision`, `step_id`, `attempt`), `observation`, `replan` or `terminal`
(`status`, `error`) and whose `data` is secret-pruned JSON, then a `RunEnd` whose result
is the run's result as canonical JSON text (`decode_result`)."""


class PlanningCancelled(msgspec.Struct, frozen=True):
    """The reply to `CancelPlanning`: False if the run had already ended."""

    cancelled: bool
