"""Delegating to an agent of the catalogue: each agent a tool, each call a run of its own.

A model that names another agent in its `agents` (`[agents.llm.NAME] agents`, `[live]
agents`) gets one tool per agent, named after it. A call is not run in the caller's
thread: the tool asks the tree's `Delegate` (the `agents` service's, `phloem.actors.
agents.delegation`), which starts the agent as a run of the one run lifecycle — in
`phloem runs` and `phloem tree` like any run — waits for its end, and answers the
agent's output. Cancelling the call (a cancelled run, a Live `toolCallCancellation`)
cancels the delegated run; so does the caller's `[agents] delegation_timeout_s`.

The answer is `{"agent", "status", "output", "state"}`: the agent's output (cut by the
call's output policy) and the state keys its run set or changed (a function agent's
`output_key`, say; only their names, under `state_keys`, when they would take more than
`MAX_DELEGATED_STATE_BYTES`), or a failure value: `agent_failed` (the delegated run ended otherwise:
its outcome and error kind), `timeout`, `cancelled`, `unavailable` (no agents service).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from phloem.agents.runner import AgentRun
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.errors import ToolFailure

MAX_DELEGATED_INPUT_CHARS = 100_000
"""The longest `input` a delegation tool takes (the agents service's own input limit)."""
MAX_DELEGATED_STATE_BYTES = 64 * 1024
"""The most JSON of a delegated run's changed state an answer carries (else the keys)."""


@dataclass(frozen=True, slots=True)
class Delegation:
    """One delegated call: which agent, with what, for whom (`label`: the caller, as
    the run record shows its owner), and the caller's cancel."""

    agent: str
    input: str
    state: Mapping[str, Any]
    label: str
    cancel: threading.Event
    timeout_s: float | None = None  # None: the tree's `[agents] delegation_timeout_s`


class Delegate(Protocol):
    """Runs an agent of the tree's catalogue as a run of its own and waits for its end."""

    def run(self, call: Delegation) -> AgentRun:
        """The finished run; raises `PhloemError` when it could not start, or `cancelled`
        / `timeout` when the caller cancelled it or it outlived its timeout."""
        ...


class AgentTool(Tool):
    """The tool of delegating to agent `name` (see the module docstring), described by
    the agent's configured `description`."""

    needs_workspace = False
    input_schema = object_schema(
        {
            "input": {
                "type": "string",
                "description": "what to ask the agent",
                "maxLength": MAX_DELEGATED_INPUT_CHARS,
            },
            "state": {"type": "object", "description": "initial session state of its run"},
        },
        ["input"],
    )

    def __init__(
        self,
        name: str,
        delegate: Callable[[], Delegate | None],
        description: str = "",
        *,
        timeout_s: float | None = None,
    ) -> None:
        self.name = name
        self.description = f"Delegate to the agent {name}" + (
            f": {description}" if description else ""
        )
        self._delegate = delegate
        self._timeout_s = timeout_s

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        delegate = self._delegate()
        if delegate is None:
            raise ToolFailure("unavailable", "the agents service is not running")
        state = args.get("state", {})
        call = Delegation(self.name, args["input"], state, ctx.session, ctx.cancel, self._timeout_s)
        try:
            run = delegate.run(call)
        except PhloemError as err:
            raise ToolFailure(_code(err.kind), f"{self.name}: {err.message}") from None
        outcome = run.outcome
        if not outcome.ok:
            kind = outcome.error.kind if outcome.error is not None else outcome.status
            raise ToolFailure(
                "agent_failed",
                f"{self.name} ended {outcome.status}: {outcome.message or kind}",
                status=str(outcome.status),
                kind=str(kind),
            )
        output, _ = ctx.limit(run.output)
        answer: JSON = {"agent": self.name, "status": str(outcome.status), "output": output}
        changed = {k: v for k, v in run.state.items() if k not in call.state or call.state[k] != v}
        if json_size(changed) <= MAX_DELEGATED_STATE_BYTES:
            answer["state"] = changed
        else:
            answer["state_keys"] = sorted(changed)
        return answer


def _code(kind: str) -> str:
    """The failure code of a delegation that raised `kind`."""
    if kind == ErrorKind.CANCELLED:
        return "cancelled"
    if kind == ErrorKind.TIMEOUT:
        return "timeout"
    if kind == ErrorKind.NOPROC:
        return "unavailable"
    return "agent_failed"
