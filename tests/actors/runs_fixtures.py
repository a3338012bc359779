"""Function agents for the run lifecycle tests: one that is done in about 5 ms, and one
that writes a secret-looking value, so the record can be checked for leaks."""

from __future__ import annotations

import time

QUICK_S = 0.005  # the work itself, not a wait for anything


def quick(topic: str) -> str:
    time.sleep(QUICK_S)
    return f"quick({len(topic)})"


def leaky(topic: str) -> str:
    return f"the answer to {topic} is 42 api_key=sk-live-0123456789abcdefghij"
