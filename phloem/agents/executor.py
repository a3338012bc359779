"""How a group of agent invocations runs: the `GroupExecutor` contract.

An executor runs one `RunAgents` group and yields, as they happen, `AgentEvent`s (an
event one of the agents produced) and exactly one `AgentDone` per agent (with an error
if the agent crashed rather than ending normally). The `PlannerAgent` loop does the
rest: isolation, merging, conflict detection and the outcome.

`InlineExecutor` runs the agents one after another in the caller's thread — handy for
debugging and for deterministic tests of planner logic. The supervised executor
(`phloem.agents.supervised`) runs each invocation as a temporary actor under
the run's supervisor, all agents of a group at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from phloem.agents.agent import Agent, invoke
from phloem.agents.context import CancelToken, InvocationContext
from phloem.agents.events import Event
from phloem.protocols.errors import ErrorKind, ErrorValue
from phloem.protocols.secrets import redact
from phloem.supervision.reasons import ExitKind


@dataclass(frozen=True)
class AgentEvent:
    agent: str
    event: Event


@dataclass(frozen=True)
class AgentDone:
    agent: str
    error: ErrorValue | None = None


GroupItem: TypeAlias = AgentEvent | AgentDone
Invocation: TypeAlias = tuple[Agent, InvocationContext]


class GroupExecutor(Protocol):
    def run_group(
        self, invocations: Sequence[Invocation], cancel: CancelToken
    ) -> Iterator[GroupItem]: ...


def crash_error(exc: BaseException) -> ErrorValue:
    """The error of an agent whose `run` raised instead of yielding an error event."""
    return ErrorValue(kind=ErrorKind.AGENT_CRASHED, message=redact(f"{type(exc).__name__}: {exc}"))


def exit_error_kind(exit_kind: ExitKind) -> ErrorKind:
    """The error kind of an agent whose child ended with `exit_kind` before its result:
    `agent_<exit kind>` (`agent_killed`, `agent_heap_exceeded`, ...). `exception` and
    `normal` are the caller's to name (`agent_crashed`, `agent_error`)."""
    if exit_kind in (ExitKind.EXCEPTION, ExitKind.NORMAL):
        raise ValueError(f"no agent_{exit_kind.value} kind")
    return ErrorKind(f"agent_{exit_kind.value}")


class InlineExecutor:
    """Runs a group's agents sequentially in the calling thread."""

    def run_group(
        self, invocations: Sequence[Invocation], cancel: CancelToken
    ) -> Iterator[GroupItem]:
        for agent, ctx in invocations:
            error: ErrorValue | None = None
            try:
                for event in invoke(agent, ctx):
                    yield AgentEvent(agent.name, event)
                    if cancel.cancelled:
                        break
            except Exception as exc:
                error = crash_error(exc)
            yield AgentDone(agent.name, error)
            if cancel.cancelled:
                return
