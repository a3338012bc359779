"""Agent methods of `phloem.Client` and `phloem.Tree`.

`AgentClientMethods` is a `ClientBase` mixin: `list_agents`, `list_providers`, `plan_agent`,
`start_agent_run`, `cancel_agent_run`, `confirm_agent_run`, `follow_agent_run`,
`attach_agent` and `durable_agent_runs` (a durable run, by its durable id) and
`run_agent` (start, follow the event stream under credit — answering `confirm` items
with `on_confirm` — and return the `AgentRun`). `AgentTreeMethods` adds
`register_agent(agent)` and `run_agent(name_or_agent, ...)` to an embedded tree: a name
runs the registered agent, an `Agent` object runs that object without registering it.
Agents registered in code live only in that process (a daemon's agents come from its
config).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from phloem.client.base import AsyncClientBase, ClientBase
from phloem.client.runs import Followed, afollow_run, follow_run
from phloem.protocols.credit import CreditWindow

if TYPE_CHECKING:
    from phloem.actors.agents.protocol import AgentInfo, AgentRunStarted, StartAgentRun
    from phloem.agents.agent import Agent
    from phloem.agents.events import Event
    from phloem.agents.runner import AgentRun
    from phloem.protocols.runs import ConfirmRequest, DurableRunInfo, RunEvent
    from phloem.supervision.actor import ActorHandle

# The agents service's messages carry the engine's `Agent`, `Event` and `AgentRun`: they
# are imported by the methods that use them, so that `import phloem.client` (every CLI
# command) does not load the agent engine.

SERVICE = "agents/service"  # the service actor inside the `agents` supervisor
DEFAULT_EVENT_WINDOW = CreditWindow(64, 4 * 1024 * 1024)
DEFAULT_RUN_TIMEOUT_S = 3_600.0  # waiting for the next stream item; a run that is silent
# longer than this is abandoned by the client (the daemon keeps its own limits)


def _agent_run(followed: Followed) -> AgentRun:
    """The finished run from its stream: the end's `AgentRun` with the events put back
    (they came one by one) and a warning if some were missed."""
    run: AgentRun = followed.result()
    events = tuple(e.data for e in followed.events)
    return msgspec.structs.replace(
        run, events=events, warnings=(*run.warnings, *followed.warnings())
    )


def _events(on_event: Callable[[Event], Any] | None) -> Callable[[RunEvent[Any]], Any] | None:
    return None if on_event is None else (lambda item: on_event(item.data))


def _start_request(
    name: str,
    input: str | None,
    state: Mapping[str, Any] | None,
    tools_allow: Sequence[str] | None,
    tools_deny: Sequence[str],
    durable: bool = False,
) -> StartAgentRun:
    from phloem.actors.agents.protocol import StartAgentRun

    allow = None if tools_allow is None else _tool_list("tools_allow", tools_allow)
    return StartAgentRun(
        name,
        input,
        dict(state or {}),
        tools_allow=allow,
        tools_deny=_tool_list("tools_deny", tools_deny),
        durable=bool(durable),
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

    def list_providers(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """The daemon's configured model providers (`phloem model list`): name, protocol,
        model, base URL, key variable and whether it is set in the daemon's environment."""
        from phloem.actors.agents.protocol import ListProviders

        rows: list[dict[str, Any]] = self.ask(
            SERVICE, ListProviders(), timeout=timeout, reply_type=list[dict[str, Any]]
        )
        return rows

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
        durable: bool = False,
    ) -> AgentRunStarted:
        """Start a run; follow `stream` with `subscribe` and cancel it with its `ref`.
        `tools_allow` / `tools_deny` restrict this run's tools (denials win). `durable`:
        journal it, so that a daemon crash resumes it (`run_id` names its journal)."""
        from phloem.actors.agents.protocol import AgentRunStarted

        started: AgentRunStarted = self.ask(
            SERVICE,
            _start_request(name, input, state, tools_allow, tools_deny, durable),
            timeout=timeout,
            reply_type=AgentRunStarted,
        )
        return started

    def attach_agent(self, run_id: str, *, timeout: float | None = None) -> AgentRunStarted:
        """Attach to the durable agent run `run_id` (started by this uid, maybe before a
        daemon crash): a new ref and stream of this client's, for `follow_agent_run` and
        `cancel_agent_run` (`unknown_durable_run` when none is kept; `not_planning_owner`
        for another uid's)."""
        from phloem.actors.agents.protocol import AgentRunStarted, AttachAgentRun

        started: AgentRunStarted = self.ask(
            SERVICE, AttachAgentRun(run_id), timeout=timeout, reply_type=AgentRunStarted
        )
        return started

    def durable_agent_runs(self, *, timeout: float | None = None) -> list[DurableRunInfo]:
        """The durable agent runs kept for this uid, oldest first."""
        from phloem.actors.agents.protocol import ListDurableAgentRuns
        from phloem.protocols.runs import DurableRunInfo

        infos: list[DurableRunInfo] = self.ask(
            SERVICE, ListDurableAgentRuns(), timeout=timeout, reply_type=list[DurableRunInfo]
        )
        return infos

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

        followed = follow_run(
            self,
            started.stream,
            AgentStreamItem,
            what=f"agent run {started.ref}",
            on_event=_events(on_event),
            on_confirm=on_confirm,
            answer=lambda call_id, approve: self.confirm_agent_run(started.ref, call_id, approve),
            window=window or DEFAULT_EVENT_WINDOW,
            timeout=timeout,
        )
        return _agent_run(followed)


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

    async def list_providers(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        from phloem.actors.agents.protocol import ListProviders

        rows: list[dict[str, Any]] = await self.ask(
            SERVICE, ListProviders(), timeout=timeout, reply_type=list[dict[str, Any]]
        )
        return rows

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
        durable: bool = False,
    ) -> AgentRunStarted:
        """Start a run; follow `stream` with `subscribe` and cancel it with its `ref`."""
        from phloem.actors.agents.protocol import AgentRunStarted

        started: AgentRunStarted = await self.ask(
            SERVICE,
            _start_request(name, input, state, tools_allow, tools_deny, durable),
            timeout=timeout,
            reply_type=AgentRunStarted,
        )
        return started

    async def attach_agent(self, run_id: str, *, timeout: float | None = None) -> AgentRunStarted:
        """Attach to the durable agent run `run_id` (see `Client.attach_agent`)."""
        from phloem.actors.agents.protocol import AgentRunStarted, AttachAgentRun

        started: AgentRunStarted = await self.ask(
            SERVICE, AttachAgentRun(run_id), timeout=timeout, reply_type=AgentRunStarted
        )
        return started

    async def durable_agent_runs(self, *, timeout: float | None = None) -> list[DurableRunInfo]:
        """The durable agent runs kept for this uid, oldest first."""
        from phloem.actors.agents.protocol import ListDurableAgentRuns
        from phloem.protocols.runs import DurableRunInfo

        infos: list[DurableRunInfo] = await self.ask(
            SERVICE, ListDurableAgentRuns(), timeout=timeout, reply_type=list[DurableRunInfo]
        )
        return infos

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

        async def answer(call_id: str, approve: bool) -> None:
            await self.confirm_agent_run(started.ref, call_id, approve)

        followed = await afollow_run(
            self,
            started.stream,
            AgentStreamItem,
            what=f"agent run {started.ref}",
            on_event=_events(on_event),
            on_confirm=on_confirm,
            answer=answer,
            window=window or DEFAULT_EVENT_WINDOW,
            timeout=timeout,
        )
        return _agent_run(followed)
