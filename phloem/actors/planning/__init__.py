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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from phloem.actors.planning.adapters import AdapterRef, AdapterRegistry, Executor, Planner
    from phloem.actors.planning.callbacks import CallbackOutcome, CallbackRunner
    from phloem.actors.planning.runtime import PLANNING_REF_KIND, PlanningRuntime

_EXPORTS = {
    "AdapterRef": "adapters",
    "AdapterRegistry": "adapters",
    "Executor": "adapters",
    "Planner": "adapters",
    "CallbackOutcome": "callbacks",
    "CallbackRunner": "callbacks",
    "PLANNING_REF_KIND": "runtime",
    "PlanningRuntime": "runtime",
}

__all__ = [
    "PLANNING_REF_KIND",
    "AdapterRef",
    "AdapterRegistry",
    "CallbackOutcome",
    "CallbackRunner",
    "Executor",
    "Planner",
    "PlanningRuntime",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
