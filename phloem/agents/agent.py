"""The `Agent` contract: a name, a description, and `run(ctx)` yielding events.

An agent's writes reach state only through the `state_delta` of the events it yields.
Failures are events too: an agent that fails yields an event whose `error` is set, and
that event ends its turn.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Iterator
from typing import ClassVar, Final

from phloem.agents.context import InvocationContext
from phloem.agents.events import Event
from phloem.agents.hooks import (
    STOP_KINDS,
    LocalCallback,
    after_returned,
    apply_local,
    as_content,
    mark_after_returned,
)
from phloem.models.interceptors import CallInfo
from phloem.protocols.errors import ErrorValue, PhloemError
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
    """Base of every agent. Subclasses implement `run`.

    `before_agent_callback` / `after_agent_callback` are the agent's local callbacks
    (ADK-style; `phloem.plugins` outcomes), applied after the tree's global plugins.
    """

    before_agent_callback: LocalCallback | None = None
    after_agent_callback: LocalCallback | None = None
    fiber_safe: ClassVar[bool] = False
    """True when `run` blocks only through `phloem.supervision.fibers` (`wait`,
    `offload`): the run lifecycle may then drive it as a fiber, which holds no thread
    while it waits. An agent that blocks any other way stalls its hub's other fibers."""

    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        before_agent_callback: LocalCallback | None = None,
        after_agent_callback: LocalCallback | None = None,
    ) -> None:
        for callback in (before_agent_callback, after_agent_callback):
            if callback is not None and not callable(callback):
                raise TypeError("agent callbacks must be callable")
        self.before_agent_callback = before_agent_callback
        self.after_agent_callback = after_agent_callback
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
    this way, never by calling `agent.run` directly. The agent's local callbacks wrap the
    run inside the chain (before) and outside it (after: after the global after-hooks)."""
    local = agent.before_agent_callback is not None or agent.after_agent_callback is not None
    if not ctx.interceptors and not local:
        return agent.run(ctx)
    info = call_info(agent, ctx)
    if not local:
        return ctx.interceptors.agent(info, lambda: agent.run(ctx))
    return _with_local(agent, ctx, info)


def _stop_on(ctx: InvocationContext, exc: PhloemError) -> None:
    """A callback's `Halt` (or a closed plugin failure) stops the whole run."""
    if exc.kind in STOP_KINDS:
        ctx.cancel.cancel(exc.message, exc.to_value())


def _with_local(agent: Agent, ctx: InvocationContext, info: CallInfo) -> Iterator[Event]:
    def inner() -> Iterator[Event]:
        try:
            returned, value = apply_local(
                agent.before_agent_callback, "before_agent", info, agent.name
            )
            if returned:
                yield Event(agent.name, as_content(value), invocation_id=ctx.invocation_id)
                return
        except PhloemError as exc:
            _stop_on(ctx, exc)
            yield agent.error_event(ctx, exc.kind, exc.message)
            return
        yield from agent.run(ctx)

    events = ctx.interceptors.agent(info, inner) if ctx.interceptors else inner()
    last = None
    mark_after_returned(False)
    for event in events:
        if event.author == agent.name and event.content:
            last = event.content
        yield event
    if agent.after_agent_callback is None or after_returned():
        return
    try:
        _, value = apply_local(agent.after_agent_callback, "after_agent", info, last)
    except PhloemError as exc:
        _stop_on(ctx, exc)
        yield agent.error_event(ctx, exc.kind, exc.message)
        return
    if value is not last and value is not None:
        yield Event(agent.name, as_content(value), invocation_id=ctx.invocation_id)
