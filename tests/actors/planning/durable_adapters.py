"""Planner and executor adapters of the durable-run tests, chosen by the run's goal.

The goal `{"key", "steps", "log", "non_idempotent": [step numbers], "slow", "slow_s"}`
makes a plan of `steps` steps (step `slow` sleeps `slow_s` seconds, the others the
context's `sleep_s`); step `i`'s metadata says `idempotent` unless `i` is listed. The
executor appends one line `"<key> <step id> <pid> <time> <life>"` to `log` (`life`:
`$DURABLE_TEST_LIFE` of the daemon whose child it is) (O_APPEND, synced) *before*
it works, so the file holds every execution that began, crash or not; then it sleeps
`sleep_s` and answers a value made from the key and step only (a resumed run's result
is the uncrashed run's).
"""

from __future__ import annotations

import os
import time
from typing import Any

from phloem.protocols.plan import Plan, Step
from phloem.protocols.result import Continue, Ok


def plan_for(goal: Any) -> dict[str, Any]:
    skip = set(goal.get("non_idempotent", []))
    steps = []
    for i in range(1, int(goal.get("steps", 5)) + 1):
        action = {"key": goal["key"], "n": i, "log": goal["log"]}
        if goal.get("slow") == i:  # this step sleeps `slow_s` (a step to crash in)
            action["sleep_s"] = goal["slow_s"]
        step = {"id": f"s{i}", "description": f"step {i}", "action": action}
        steps.append(step | {"metadata": {"idempotent": i not in skip}})
    return {"id": f"p-{goal['key']}", "revision": 0, "goal": goal, "steps": steps}


def value_of(key: Any, n: int) -> dict[str, Any]:
    return {"key": key, "n": n, "value": f"{key}:{n * n}"}


class DurablePlanner:
    def plan(self, target: Any, goal: Any, context: Any, config: Any) -> Any:
        return Ok(plan_for(goal))

    def review(
        self,
        target: Any,
        plan: Plan,
        step: Step,
        observation: dict[str, Any],
        context: Any,
        config: Any,
    ) -> Any:
        return Continue()


class LoggingExecutor:
    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        action = step.action
        life = os.environ.get("DURABLE_TEST_LIFE", "0")  # which daemon started it
        line = f"{action['key']} {step.id} {os.getpid()} {time.time()} {life}\n".encode()
        fd = os.open(action["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        time.sleep(float(step.action.get("sleep_s", (context or {}).get("sleep_s", 0.0))))
        return Ok(value_of(action["key"], int(action["n"])))
