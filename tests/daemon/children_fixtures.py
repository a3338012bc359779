"""Work that holds its process child until the test opens a gate: for the tests that look
at the tree while a planning callback, a bash command, an isolated agent and an eval case
run (`test_tree_children`)."""

from __future__ import annotations

import os
import time
from typing import Any

from phloem.protocols.plan import Step
from phloem.protocols.result import Ok

GATE_POLL_S = 0.02  # the work's own wait (in the child), not a test's synchronisation


def _hold(gate: str) -> None:
    while not os.path.exists(gate):
        time.sleep(GATE_POLL_S)


def held(gate: str) -> str:
    """A FunctionAgent body (isolated: in a process child) that ends once `gate` exists."""
    _hold(gate)
    return "released"


class GatedExecutor:
    """Runs each step, whose action names a gate file, until that file exists."""

    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        _hold(str(step.action["gate"]))
        return Ok("released")
