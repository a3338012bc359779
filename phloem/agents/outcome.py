"""`PlannerOutcome`: how a `PlannerAgent` run ended, always explicitly.

Hitting `max_iterations` is `iteration_limit`, never a quiet success; a planner that
named an unknown agent is `plan_error`; a failed model call is `model_failed`. The outcome
also carries the decision log, iterations, replans, model cost, the final event and the
run's wall time (`duration_ms`; each executed `run_agents` decision has its group's).
"""

from __future__ import annotations

import enum

import msgspec

from phloem.agents.events import Event
from phloem.protocols.content import Usage
from phloem.protocols.errors import ErrorValue
from phloem.protocols.secrets import redact


class OutcomeStatus(enum.StrEnum):
    DONE = "done"
    DONE_WITH_RESULT = "done_with_result"
    ITERATION_LIMIT = "iteration_limit"
    GOAL_MISSING = "goal_missing"
    PLAN_ERROR = "plan_error"
    AGENT_FAILED = "agent_failed"
    MODEL_FAILED = "model_failed"
    CANCELLED = "cancelled"


OK_STATUSES = frozenset({OutcomeStatus.DONE, OutcomeStatus.DONE_WITH_RESULT})


class Decision(msgspec.Struct, frozen=True, omit_defaults=True):
    """One planner decision, with the state keys it saw."""

    iteration: int
    action: str  # run_agents | done | done_with_result | noop
    agents: tuple[str, ...] = ()
    result: str | None = None
    state_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    executed: bool = True
    duration_ms: int = 0  # the wall time of the group a run_agents decision ran


class PlannerOutcome(msgspec.Struct, frozen=True, omit_defaults=True):
    """The end of one `PlannerAgent` run (its `message` redacted, as error texts are)."""

    status: OutcomeStatus
    agent: str
    message: str
    iterations: int = 0
    replans: int = 0
    model_calls: int = 0
    usage: Usage = msgspec.field(default_factory=Usage)
    decisions: tuple[Decision, ...] = ()
    result: str | None = None
    error: ErrorValue | None = None
    final_event: Event | None = None
    duration_ms: int = 0  # the run's wall time

    def __post_init__(self) -> None:
        # the message often quotes an error or a cancel reason: never a credential
        msgspec.structs.force_setattr(self, "message", redact(self.message))

    @property
    def ok(self) -> bool:
        """True for `done` and `done_with_result`."""
        return self.status in OK_STATUSES
