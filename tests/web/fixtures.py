"""Function agents for the web view's tests: steps that take a while, so a run is seen
running, step by step, before it ends."""

from __future__ import annotations

import time

STEP_S = 1.0


def step_a(topic: str) -> str:
    time.sleep(STEP_S)
    return f"a({len(topic)})"


def step_b(a: str) -> str:
    time.sleep(STEP_S)
    return f"b({a})"
