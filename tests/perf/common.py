"""Helpers shared by the benchmarks: timing and the result row format."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def median_seconds(fn: Callable[[], Any], repeat: int, warmup: int = 20) -> float:
    """Median wall time of one call of `fn` over `repeat` calls (after `warmup`)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def row(
    name: str,
    value: float,
    unit: str,
    floor_name: str,
    floor: float,
    target: float | None,
    *,
    higher_is_better: bool = False,
) -> dict[str, Any]:
    """One result row; `ratio` is how many times worse than the floor (1.0 = equal)."""
    ratio = (floor / value if higher_is_better else value / floor) if value and floor else 0.0
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "floor_name": floor_name,
        "floor": floor,
        "ratio": ratio,
        "target": target,
    }
