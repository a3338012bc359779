"""Run any agent in-process against a session: `run_agent(...) -> AgentRun`.

The runner creates (or reuses) a session, records the user's message as an event,
drives the agent, appends every event to the session as it arrives (calling
`on_event` for live streaming), and ends the invocation (dropping `temp:` keys).
Every run has a `PlannerOutcome`: a `PlannerAgent` returns its own; for any other agent
the runner derives one (`done`, or `agent_failed` when the agent yielded an error or
raised). The outcome's `duration_ms` is the run's wall time, also recorded in the
`phloem.run.duration` histogram.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import msgspec

from phloem.agents.agent import Agent, invoke
from phloem.agents.context import CancelToken, InvocationContext
from phloem.agents.events import Event
from phloem.agents.executor import GroupExecutor, crash_error
from phloem.agents.hooks import STOP_KINDS
from phloem.agents.outcome import OutcomeStatus, PlannerOutcome
from phloem.agents.session import InMemorySessionService, Session, SessionService
from phloem.base import telemetry
from phloem.models.interceptors import NO_INTERCEPTORS, CallInfo, Interceptors, RunCall
from phloem.protocols.content import Content
from phloem.protocols.errors import ErrorKind, ErrorValue
from phloem.protocols.warnings import RunWarning

USER_AUTHOR = "user"


class AgentRun(msgspec.Struct, frozen=True):
    """A finished run: its outcome, the events it produced and the final state."""

    agent: str
    session_id: str
    outcome: PlannerOutcome
    events: tuple[Event, ...]
    state: dict[str, Any]
    # Non-fatal notices of the run (instruction discovery, prompt commands, a plugin that
    # failed under `failure = "open"`, ...).
    warnings: tuple[RunWarning, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    @property
    def output(self) -> str:
        """The run's answer: the outcome's result when it has one, else the last text an
        agent said (not the user's, not a streamed piece, not a tool call, not a
        planner's status line such as "done after 5 iterations")."""
        if self.outcome.result is not None:
            return self.outcome.result
        for event in reversed(self.events):
            content = event.content
            if (
                event.author == "user"
                or event.partial
                or event.planner_status is not None
                or content is None
                or content.function_calls
            ):
                continue
            if event.text:
                return event.text
        return ""


def run_agent(
    agent: Agent,
    *,
    input: str | Content | None = None,
    state: Mapping[str, Any] | None = None,
    sessions: SessionService | None = None,
    session: Session | None = None,
    app: str = "phloem",
    user: str = "user",
    executor: GroupExecutor | None = None,
    cancel: CancelToken | None = None,
    on_event: Callable[[Event], None] | None = None,
    interceptors: Interceptors = NO_INTERCEPTORS,
) -> AgentRun:
    """Run `agent` to its end and return the `AgentRun`.

    Without an `executor`, sub-agent invocations run as supervised actors under a
    supervisor made for this run (`SupervisedExecutor`), stopped when the run ends; pass
    `InlineExecutor()` to run groups sequentially in the calling thread instead.
    Every agent invocation, model call and tool call of the run goes through
    `interceptors` (the tree's chain, `phloem.models.interceptors`).
    """
    if executor is None:
        from phloem.agents.supervised import SupervisedExecutor

        with SupervisedExecutor(agent.name) as own:
            return run_agent(
                agent,
                input=input,
                state=state,
                sessions=sessions,
                session=session,
                app=app,
                user=user,
                executor=own,
                cancel=cancel,
                on_event=on_event,
                interceptors=interceptors,
            )
    sessions = sessions or InMemorySessionService()
    if session is None:
        session = sessions.create_session(app, user, state=state)
    elif state:
        sessions.append_event(session, Event(author=USER_AUTHOR, actions=_delta(state)))
    content = Content.user(input) if isinstance(input, str) else input
    cancel = cancel or CancelToken()
    started = time.monotonic()
    if not interceptors:
        run = _run(agent, sessions, session, executor, cancel, on_event, interceptors, content)
        return _timed(run, started)
    info = CallInfo(
        kind="run",
        agent=agent.name,
        session_id=session.id,
        app=session.app,
        user=session.user,
        target=type(agent).__name__,
    )
    # The run through the chain's `run_call` (plugins' on_user_message/before_run/after_run).
    call = RunCall(content, cancel.cancel)
    run = interceptors.run(
        info,
        call,
        lambda c: _run(
            agent, sessions, session, executor, cancel, on_event, interceptors, c.user_content
        ),
    )
    return _timed(run, started)


def _timed(run: AgentRun, started: float) -> AgentRun:
    """`run` with its wall time on the outcome (`duration_ms`), recorded in the
    `phloem.run.duration` histogram (seconds, by kind and outcome)."""
    elapsed = time.monotonic() - started
    telemetry.record("phloem.run.duration", elapsed, kind="agent", outcome=str(run.outcome.status))
    outcome = msgspec.structs.replace(run.outcome, duration_ms=int(elapsed * 1000))
    return msgspec.structs.replace(run, outcome=outcome)


def _run(
    agent: Agent,
    sessions: SessionService,
    session: Session,
    executor: GroupExecutor,
    cancel: CancelToken,
    on_event: Callable[[Event], None] | None,
    interceptors: Interceptors,
    content: Content | None,
) -> AgentRun:
    ctx = InvocationContext(
        state=session.state,
        events=session.events,
        user_content=content,
        app=session.app,
        user=session.user,
        session_id=session.id,
        cancel=cancel,
        executor=executor,
        interceptors=interceptors,
    )
    produced: list[Event] = []
    if content is not None:
        first = Event(author=USER_AUTHOR, content=content, invocation_id=ctx.invocation_id)
        sessions.append_event(session, first)
        produced.append(first)
        ctx = ctx.derive(events=session.events)

    def deliver(event: Event) -> None:
        if not event.partial:  # a streamed piece is shown, never stored
            sessions.append_event(session, event)
            produced.append(event)
        if on_event is not None:
            on_event(event)

    outcome: PlannerOutcome | None = None
    crash: ErrorValue | None = None
    try:
        outcome = _drive(invoke(agent, ctx), deliver)
    except Exception as exc:
        crash = crash_error(exc)
        deliver(Event(author=agent.name, invocation_id=ctx.invocation_id, error=crash))
    finally:
        sessions.end_invocation(session)
    if outcome is None:
        outcome = _derive_outcome(agent, ctx, produced, crash)
    outcome = _plugin_stop(agent, produced, outcome, cancel.error)
    if ctx.usage.calls:
        outcome = msgspec.structs.replace(
            outcome,
            model_calls=outcome.model_calls + ctx.usage.calls,
            usage=outcome.usage + ctx.usage.usage,
        )
    telemetry.count("phloem.runs", kind="agent", outcome=str(outcome.status))
    return AgentRun(
        agent=agent.name,
        session_id=session.id,
        outcome=outcome,
        events=tuple(produced),
        state=session.state,
    )


def _drive(events: Iterator[Event], deliver: Callable[[Event], None]) -> PlannerOutcome | None:
    """Pump `events` into `deliver`; the generator's return value if it is an outcome."""
    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            value = stop.value
            return value if isinstance(value, PlannerOutcome) else None
        deliver(event)


def _derive_outcome(
    agent: Agent, ctx: InvocationContext, produced: list[Event], crash: ErrorValue | None
) -> PlannerOutcome:
    own = [e for e in produced if e.author == agent.name]
    error = crash or next((e.error for e in own if e.error is not None), None)
    final = produced[-1] if produced else None
    if ctx.cancel.cancelled:
        return PlannerOutcome(
            status=OutcomeStatus.CANCELLED,
            agent=agent.name,
            message=f"cancelled: {ctx.cancel.reason}",
            error=ErrorValue(kind=ErrorKind.CANCELLED, message=str(ctx.cancel.reason)),
            final_event=final,
        )
    if error is not None:
        return PlannerOutcome(
            status=OutcomeStatus.AGENT_FAILED,
            agent=agent.name,
            message=f"agent {agent.name!r} failed: {error.kind}: {error.message}",
            error=error,
            final_event=final,
        )
    return PlannerOutcome(
        status=OutcomeStatus.DONE, agent=agent.name, message="done", final_event=final
    )


def _plugin_stop(
    agent: Agent, produced: list[Event], outcome: PlannerOutcome, error: ErrorValue | None
) -> PlannerOutcome:
    """A run a plugin or a local callback stopped (`plugin_halted`, `plugin_failed`) ends
    with that error, not with the cancellation it caused."""
    stop = error if error is not None and error.kind in STOP_KINDS else None
    stop = stop or next((e.error for e in produced if e.error and e.error.kind in STOP_KINDS), None)
    if stop is None or (outcome.error is not None and outcome.error.kind == stop.kind):
        return outcome
    return PlannerOutcome(
        status=OutcomeStatus.AGENT_FAILED,
        agent=agent.name,
        message=f"{stop.kind}: {stop.message}",
        error=stop,
        final_event=outcome.final_event,
    )


def _delta(state: Mapping[str, Any]) -> Any:
    from phloem.agents.events import EventActions

    return EventActions(state_delta=dict(state))


def drive_planner(
    gen: Generator[Event, None, PlannerOutcome],
) -> tuple[list[Event], PlannerOutcome]:
    """Collect a planner run's events and outcome (handy in tests and tools)."""
    events: list[Event] = []
    outcome = _drive(gen, events.append)
    assert outcome is not None
    return events, outcome
