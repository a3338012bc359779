"""FunctionAgent targets for `phloem mcp serve --agents` tests."""

from __future__ import annotations

import time


def greet(name: str) -> str:
    """A greeting for `name`."""
    return f"hello, {name}"


def slow(seconds: float) -> str:
    """Sleeps `seconds`, then says so: a long agent call (progress while it runs)."""
    time.sleep(float(seconds))
    return f"slept {seconds} s"
