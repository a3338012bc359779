"""The planning runtime: explicit, versioned plans run by trusted planner/executor adapters.

`PlanningRuntime` (runtime) validates requests and supervises runs; `PlanningRun` (run) is
one run's actor; `CallbackRunner` (callbacks) isolates every callback in a capped process
child running `worker.invoke`, which answers an `outcomes.Outcome`; `AdapterRegistry`
(adapters) loads adapters by configured name only. The documents live in
`phloem.protocols.plan` (plans, options) and `phloem.protocols.result` (results, callback
outcomes); the service messages in `protocol`.

Names are imported lazily: a callback child imports only `worker`, `outcomes` and `adapters`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.actors.planning.adapters import (
        AdapterRef as AdapterRef,
        AdapterRegistry as AdapterRegistry,
        Executor as Executor,
        Planner as Planner,
    )
    from phloem.actors.planning.callbacks import (
        CallbackOutcome as CallbackOutcome,
        CallbackRunner as CallbackRunner,
    )
    from phloem.actors.planning.runtime import (
        PLANNING_REF_KIND as PLANNING_REF_KIND,
        PlanningRuntime as PlanningRuntime,
    )

_EXPORTS: dict[str, str] = {
    "AdapterRef": "phloem.actors.planning.adapters",
    "AdapterRegistry": "phloem.actors.planning.adapters",
    "Executor": "phloem.actors.planning.adapters",
    "Planner": "phloem.actors.planning.adapters",
    "CallbackOutcome": "phloem.actors.planning.callbacks",
    "CallbackRunner": "phloem.actors.planning.callbacks",
    "PLANNING_REF_KIND": "phloem.actors.planning.runtime",
    "PlanningRuntime": "phloem.actors.planning.runtime",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
