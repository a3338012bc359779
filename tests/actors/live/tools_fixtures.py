"""Trusted components the Live tool-call tests allow (run in process children)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def add(a: int, b: int) -> dict[str, int]:
    """Add two numbers."""
    return {"sum": a + b}


def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"


def big() -> str:
    """An answer larger than any response bound."""
    return "x" * (2 * 1024 * 1024)


def boom() -> None:
    """Always fails."""
    raise RuntimeError("tool exploded")


def meet(folder: str, name: str, count: int) -> str:
    """Arrive at a rendezvous in `folder` and wait until `count` callers are there: only
    calls running at the same time can all return."""
    Path(folder, name).write_text("here")
    deadline = time.monotonic() + 20
    while len(os.listdir(folder)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError("nobody came")
        time.sleep(0.01)
    return name
