"""Ray, imported on first use and typed as `Any` (its stubs cover little of the API we
use, and the extra may be absent: only the Ray backend ever calls `ray()`)."""

from __future__ import annotations

import importlib
from typing import Any


def ray() -> Any:
    """The `ray` module; ImportError when the `ray` extra is not installed."""
    return importlib.import_module("ray")


def node_affinity(node_id: str) -> Any:
    """A hard scheduling strategy pinning an actor to one node."""
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    return strategies.NodeAffinitySchedulingStrategy(node_id, soft=False)
