"""Trusted components the telemetry tests name in daemon configs and planning runs."""

from __future__ import annotations

import os
from typing import Any

from phloem.base import telemetry
from phloem.protocols.plan import Step
from phloem.protocols.result import Ok


def burst(n: int = 10_000) -> str:
    """A function agent that emits `n` spans as fast as it can (the bus must keep up or
    drop, never block it)."""
    for i in range(n):
        with telemetry.span("burst", i=i):
            pass
    return f"{n} spans"


class TraceExecutor:
    """Answers each step with the W3C context its callback child received."""

    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        return Ok({"traceparent": os.environ.get("TRACEPARENT", "")})
