"""The `Agent` contract: a name, a description, and `run(ctx)` yielding events.

An agent's writes reach state only through the `state_delta` of the events it yields.
Failures are events too: an agent that fails yields an event whose `error` is set, and
that event ends its turn.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Iterator
from typing import Final

from phloem.actors.agents.context import InvocationContext
from phloem.actors.agents.events import Event
from phloem.models.interceptors import CallInfo
from phloem.protocols.errors import ErrorValue
from phloem.protocols.secrets import redact

AGENT_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
RESERVED_NAMES: Final = frozenset({"user"})
MAX_DESCRIPTION_CHARS: Final = 2_000


def check_agent_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError("name must be a str")
    if not AGENT_NAME_RE.match(name):
        raise ValueError("name must match [A-Za-z_][A-Za-z0-9_-]{0,63}")
    if name in RESERVED_NAMES:
        raise ValueError(f"name {name!r} is reserved")
    return name


class Agent(abc.ABC):
    """Base of every agent. Subclasses implement `run`."""

    def __init__(self, name: str, description: str = "") -> None:
        self.name = check_agent_name(name)
        if not isinstance(description, str):
            raise TypeError("description must be a str")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise ValueError(f"description must be at most {MAX_DESCRIPTION_CHARS} characters")
        self.description = description

    @property
    def sub_agents(self) -> tuple[Agent, ...]:
        return ()

    @abc.abstractmethod
    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        """Do the work, yielding events; writes travel in their `state_delta`."""

    def error_event(self, ctx: InvocationContext, kind: str, message: str) -> Event:
        """The event that ends this agent's turn with a failure (message redacted)."""
        return Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            error=ErrorValue(kind=kind, message=redact(message)),
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def call_info(agent: Agent, ctx: InvocationContext) -> CallInfo:
    """The `CallInfo` of `agent` running in `ctx` (its model and tool calls derive from it)."""
    return CallInfo(
        kind="agent",
        agent=agent.name,
        invocation_id=ctx.invocation_id,
        session_id=ctx.session_id,
        app=ctx.app,
        user=ctx.user,
        target=type(agent).__name__,
    )


def invoke(agent: Agent, ctx: InvocationContext) -> Iterator[Event]:
    """Run `agent` in `ctx` through the run's interceptors: every executor invokes agents
    this way, never by calling `agent.run` directly."""
    if not ctx.interceptors:
        return agent.run(ctx)
    return ctx.interceptors.agent(call_info(agent, ctx), lambda: agent.run(ctx))
