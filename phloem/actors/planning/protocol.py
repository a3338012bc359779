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
    "AttachPlanning",
    "AwaitPlanning",
    "CancelPlanning",
    "ListDurablePlanning",
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


class AttachPlanning(msgspec.Struct, frozen=True, tag="attach"):
    """Bind the durable run `run_id` to the caller (its uid must be the starter's):
    answered with `PlanningStarted` — a new ref and stream of the caller's; a run that
    has ended sends its end on that stream at once, and its result to an await."""

    run_id: Any


class ListDurablePlanning(msgspec.Struct, frozen=True, tag="durable"):
    """Answered with the durable runs kept for the caller's uid
    (`list[phloem.protocols.runs.DurableRunInfo]`), oldest first."""


PlanningRequest: TypeAlias = (
    StartPlanning | AwaitPlanning | CancelPlanning | AttachPlanning | ListDurablePlanning
)


class PlanningStarted(msgspec.Struct, frozen=True):
    """The reply to `StartPlanning` and `AttachPlanning`: the run's opaque, owner-bound
    ref, its stream of `phloem.protocols.runs` items (`PlanningStreamItem`), and a
    durable run's durable id (`run_id`; "" for a run that is not durable)."""

    ref: str
    stream: str
    run_id: str = ""


PlanningStreamItem = run_item_type(dict[str, Any], str)
"""A planning run's stream: `RunEvent`s whose `kind` is `plan_accepted`, `step_started`
(`plan_id`, `revision`, `step_id`, `attempt`), `observation`, `replan` or `terminal`
(`status`, `error`) and whose `data` is secret-pruned JSON, then a `RunEnd` whose result
is the run's result as canonical JSON text (`decode_result`)."""


class PlanningCancelled(msgspec.Struct, frozen=True):
    """The reply to `CancelPlanning`: False if the run had already ended."""

    cancelled: bool
