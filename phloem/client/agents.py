"""Agent methods of `phloem.Client` and `phloem.Tree`.

`AgentClientMethods` is a `ClientBase` mixin: `list_agents`, `plan_agent`,
`start_agent_run`, `cancel_agent_run`, `confirm_agent_run`, `follow_agent_run` and
`run_agent` (start, follow the event stream under credit — answering `confirm` items
with `on_confirm` — and return the `AgentRun`). `AgentTreeMethods` adds
`register_agent(agent)` and `run_agent(name_or_agent, ...)` to an embedded tree: a name
runs the registered agent, an `Agent` object runs that object without registering it.
Agents registered in code live only in that process (a daemon's agents come from its
config).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from phloem.client.base import AsyncClientBase, ClientBase
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.actors.agents.protocol import (
        AgentInfo,
        AgentRunStarted,
        AgentStreamItem,
        StartAgentRun,
    )
    from phloem.agents.agent import Agent
    from phloem.agents.events import Event
    from phloem.agents.runner import AgentRun
    from phloem.instructions.protocol import ConfirmRequest
    from phloem.supervision.actor import ActorHandle

# The agents service's messages carry the engine's `Event` and `AgentRun`: they are
# imported by the methods that use them, so that `import phloem.client` (every CLI
# command) does not load the agent engine.

SERVICE = "agents/service"  # the service actor inside the `agents` supervisor
DEFAULT_EVENT_WINDOW = CreditWindow(64, 4 * 1024 * 1024)
DEFAULT_RUN_TIMEOUT_S = 3_600.0  # waiting for the next stream item; a run that is silent
# longer than this is abandoned by the client (the daemon keeps its own limits)


class _RunFold:
    """Folds an agent run's stream items into its `AgentRun` (both clients use it)."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.events: list[Event] = []

    def take(self, item: AgentStreamItem) -> Event | AgentRun | ConfirmRequest:
        """An event to show, a confirmation to answer, or the finished run (the end
        carries outcome and state; the events came one by one)."""
        from phloem.actors.agents.protocol import AgentRunEvent
        from phloem.instructions.protocol import ConfirmRequest

        if isinstance(item, ConfirmRequest):
            return item
        if isinstance(item, AgentRunEvent):
            self.events.append(item.event)
            return item.event
        return msgspec.structs.replace(item.run, events=tuple(self.events))

    def ended(self, err: PhloemError) -> PhloemError:
        """What a stream end before the result means: the stream's own error, or
        `run_incomplete` when it merely closed."""
        if err.kind != ErrorKind.CLOSED:
            return err
        return PhloemError(
            ErrorKind.RUN_INCOMPLETE,
            f"the event stream of run {self.ref} ended without its result",
        )


def _start_request(
    name: str,
    input: str | None,
    state: Mapping[str, Any] | None,
    tools_allow: Sequence[str] | None,
    tools_deny: Sequence[str],
) -> StartAgentRun:
    from phloem.actors.agents.protocol import StartAgentRun

    allow = None if tools_allow is None else _tool_list("tools_allow", tools_allow)
    return StartAgentRun(
        name,
        input,
        dict(state or {}),
        tools_allow=allow,
        tools_deny=_tool_list("tools_deny", tools_deny),
    )


def _tool_list(what: str, names: Sequence[str]) -> list[str]:
    if isinstance(names, str):
        raise TypeError(f"{what} must be a list of tool names, not a str")
    return list(names)


def _check_name(name: object) -> None:
    if not isinstance(name, str):
        raise TypeError("name must be a str (register Agent objects on an embedded tree)")


class AgentClientMethods(ClientBase):
    def list_agents(self, *, timeout: float | None = None) -> list[AgentInfo]:
        from phloem.actors.agents.protocol import AgentInfo, ListAgents

        result: list[AgentInfo] = self.ask(
            SERVICE, ListAgents(), timeout=timeout, reply_type=list[AgentInfo]
        )
        return result

    def plan_agent(
        self, name: str, state: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> list[list[str]]:
        """The groups `name` would run first given `state` (GOAP and fixed planners)."""
        from phloem.actors.agents.protocol import AgentPlan, PlanAgent

        plan = self.ask(
            SERVICE, PlanAgent(name, dict(state or {})), timeout=timeout, reply_type=AgentPlan
        )
        return plan.groups

    def start_agent_run(
        self,
        name: str,
        *,
        input: str | None = None,
        state: Mapping[str, Any] | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        timeout: float | None = None,
    ) -> AgentRunStarted:
        """Start a run; follow `stream` with `subscribe` and cancel it with its `ref`.
        `tools_allow` / `tools_deny` restrict this run's tools (denials win)."""
        from phloem.actors.agents.protocol import AgentRunStarted

        started: AgentRunStarted = self.ask(
            SERVICE,
            _start_request(name, input, state, tools_allow, tools_deny),
            timeout=timeout,
            reply_type=AgentRunStarted,
        )
        return started

    def cancel_agent_run(self, ref: str, *, timeout: float | None = None) -> None:
        from phloem.actors.agents.protocol import CancelAgentRun

        self.ask(SERVICE, CancelAgentRun(ref), timeout=timeout)

    def confirm_agent_run(
        self, ref: str, call_id: str, approve: bool, *, timeout: float | None = None
    ) -> None:
        """Answer a run's `confirm` item: run the tool call `call_id` or refuse it.
        Only the run's owner may (`not_owner`); `unknown_call` when nothing waits."""
        from phloem.actors.agents.protocol import ConfirmAgentRun

        self.ask(SERVICE, ConfirmAgentRun(ref, call_id, bool(approve)), timeout=timeout)

    def run_agent(
        self,
        name: str,
        *,
        input: str | None = None,
        state: Mapping[str, Any] | None = None,
        on_event: Callable[[Event], None] | None = None,
        on_confirm: Callable[[ConfirmRequest], bool] | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        window: CreditWindow | None = None,
        timeout: float = DEFAULT_RUN_TIMEOUT_S,
    ) -> AgentRun:
        """Run agent `name` to its end; `on_event` sees each event as it arrives,
        `on_confirm` answers each confirmation (True runs the tool call)."""
        _check_name(name)
        started = self.start_agent_run(
            name, input=input, state=state, tools_allow=tools_allow, tools_deny=tools_deny
        )
        return self.follow_agent_run(
            started, on_event=on_event, on_confirm=on_confirm, window=window, timeout=timeout
        )

    def follow_agent_run(
        self,
        started: AgentRunStarted,
        *,
        on_event: Callable[[Event], None] | None = None,
        on_confirm: Callable[[ConfirmRequest], bool] | None = None,
        window: CreditWindow | None = None,
        timeout: float = DEFAULT_RUN_TIMEOUT_S,
    ) -> AgentRun:
        """Follow a started run's stream to its end; `on_event` sees each event,
        `on_confirm` answers each confirmation (without it, a confirmation waits for
        `confirm_agent_run` or its timeout)."""
        from phloem.actors.agents.protocol import AgentStreamItem
        from phloem.agents.runner import AgentRun
        from phloem.instructions.protocol import ConfirmRequest

        stream = self.subscribe(
            started.stream, window or DEFAULT_EVENT_WINDOW, event_type=AgentStreamItem
        )
        fold = _RunFold(started.ref)
        with stream:
            while True:
                try:
                    got = fold.take(stream.recv(timeout))
                except PhloemError as err:
                    raise fold.ended(err) from None
                if isinstance(got, AgentRun):
                    return got
                if isinstance(got, ConfirmRequest):
                    if on_confirm is not None:
                        approve = bool(on_confirm(got))
                        try:
                            self.confirm_agent_run(started.ref, got.call_id, approve)
                        except PhloemError as err:
                            if err.kind != ErrorKind.UNKNOWN_CALL:
                                raise
                    continue
                if on_event is not None:
                    on_event(got)


class _TreeLike(Protocol):
    def resolve(self, path: str) -> ActorHandle: ...

    def client(self, label: str = "") -> Any: ...


class AgentTreeMethods:
    """Methods of an embedded `Tree` (mixed into `phloem.Tree`)."""

    def register_agent(self: _TreeLike, agent: Agent, *, replace: bool = False) -> str:
        """Make `agent` runnable by name in this tree; returns its name."""
        from phloem.actors.agents.protocol import RegisterAgent
        from phloem.agents.agent import Agent

        if not isinstance(agent, Agent):
            raise TypeError("agent must be an Agent")
        name: str = self.resolve(SERVICE).ask(RegisterAgent(agent, replace))
        return name

    def run_agent(
        self: _TreeLike,
        agent: str | Agent,
        *,
        input: str | None = None,
        state: Mapping[str, Any] | None = None,
        on_event: Callable[[Event], None] | None = None,
        on_confirm: Callable[[ConfirmRequest], bool] | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
    ) -> AgentRun:
        """Run an agent to its end: the one registered under a name, or an `Agent` object
        itself (not registered: build one per invocation, or share one between runs —
        each run has its own session, state and invocation ids)."""
        from phloem.actors.agents.protocol import StartAgentObject, StartAgentRun
        from phloem.agents.agent import Agent
        from phloem.client.local import LocalTransport

        client = self.client("run_agent")
        try:
            if not isinstance(agent, Agent):
                run: AgentRun = client.run_agent(
                    agent,
                    input=input,
                    state=state,
                    on_event=on_event,
                    on_confirm=on_confirm,
                    tools_allow=tools_allow,
                    tools_deny=tools_deny,
                )
                return run
            transport = client.transport
            assert isinstance(transport, LocalTransport)
            # Through msgpack, as a named run's request is: the same checks, and the run
            # gets its own copy of `state`.
            request = msgspec.msgpack.decode(
                msgspec.msgpack.encode(
                    _start_request(agent.name, input, state, tools_allow, tools_deny)
                ),
                type=StartAgentRun,
            )
            started: AgentRunStarted = self.resolve(SERVICE).ask(
                StartAgentObject(agent, request, transport.owner)
            )
            run = client.follow_agent_run(started, on_event=on_event, on_confirm=on_confirm)
            return run
        finally:
            client.close()


class AsyncAgentMethods(AsyncClientBase):
    """The agent methods of `AsyncClient`, as coroutines (same requests and errors)."""

    async def list_agents(self, *, timeout: float | None = None) -> list[AgentInfo]:
        from phloem.actors.agents.protocol import AgentInfo, ListAgents

        result: list[AgentInfo] = await self.ask(
            SERVICE, ListAgents(), timeout=timeout, reply_type=list[AgentInfo]
        )
        return result

    async def plan_agent(
        self, name: str, state: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> list[list[str]]:
        """The groups `name` would run first given `state` (GOAP and fixed planners)."""
        from phloem.actors.agents.protocol import AgentPlan, PlanAgent

        plan = await self.ask(
            SERVICE,
            PlanAgent(name, dict(state or {})),
            timeout=timeout,
            reply_type=AgentPlan,
        )
        return plan.groups

    async def start_agent_run(
        self,
        name: str,
        *,
        input: str | None = None,
        state: Mapping[str, Any] | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        timeout: float | None = None,
    ) -> AgentRunStarted:
        """Start a run; follow `stream` with `subscribe` and cancel it with its `ref`."""
        from phloem.actors.agents.protocol import AgentRunStarted

        started: AgentRunStarted = await self.ask(
            SERVICE,
            _start_request(name, input, state, tools_allow, tools_deny),
            timeout=timeout,
            reply_type=AgentRunStarted,
        )
        return started

    async def cancel_agent_run(self, ref: str, *, timeout: float | None = None) -> None:
        from phloem.actors.agents.protocol import CancelAgentRun

        await self.ask(SERVICE, CancelAgentRun(ref), timeout=timeout)

    async def confirm_agent_run(
        self, ref: str, call_id: str, approve: bool, *, timeout: float | None = None
    ) -> None:
        """Answer a run's `confirm` item (see the sync client)."""
        from phloem.actors.agents.protocol import ConfirmAgentRun

        await self.ask(SERVICE, ConfirmAgentRun(ref, call_id, bool(approve)), timeout=timeout)

    async def run_agent(
        self,
        name: str,
        *,
        input: str | None = None,
        state: Mapping[str, Any] | None = None,
        on_event: Callable[[Event], Awaitable[None] | None] | None = None,
        on_confirm: Callable[[ConfirmRequest], Awaitable[bool] | bool] | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
        window: CreditWindow | None = None,
        timeout: float = DEFAULT_RUN_TIMEOUT_S,
    ) -> AgentRun:
        """Run agent `name` to its end; `on_event` (a function or a coroutine function)
        sees each event as it arrives; `timeout` bounds the wait for each stream item."""
        _check_name(name)
        started = await self.start_agent_run(
            name, input=input, state=state, tools_allow=tools_allow, tools_deny=tools_deny
        )
        return await self.follow_agent_run(
            started, on_event=on_event, on_confirm=on_confirm, window=window, timeout=timeout
        )

    async def follow_agent_run(
        self,
        started: AgentRunStarted,
        *,
        on_event: Callable[[Event], Awaitable[None] | None] | None = None,
        on_confirm: Callable[[ConfirmRequest], Awaitable[bool] | bool] | None = None,
        window: CreditWindow | None = None,
        timeout: float = DEFAULT_RUN_TIMEOUT_S,
    ) -> AgentRun:
        """Follow a started run's stream to its end; `on_event` sees each event."""
        from phloem.actors.agents.protocol import AgentStreamItem
        from phloem.agents.runner import AgentRun
        from phloem.instructions.protocol import ConfirmRequest

        stream = await self.subscribe(
            started.stream, window or DEFAULT_EVENT_WINDOW, event_type=AgentStreamItem
        )
        fold = _RunFold(started.ref)
        async with stream:
            while True:
                try:
                    got = fold.take(await stream.recv(timeout))
                except PhloemError as err:
                    raise fold.ended(err) from None
                if isinstance(got, AgentRun):
                    return got
                if isinstance(got, ConfirmRequest):
                    if on_confirm is not None:
                        answer = on_confirm(got)
                        if inspect.isawaitable(answer):
                            answer = await answer
                        try:
                            await self.confirm_agent_run(started.ref, got.call_id, bool(answer))
                        except PhloemError as err:
                            if err.kind != ErrorKind.UNKNOWN_CALL:
                                raise
                    continue
                if on_event is not None:
                    outcome = on_event(got)
                    if inspect.isawaitable(outcome):
                        await outcome
