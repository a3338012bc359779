"""`PlannerAgent`: the planning loop, with isolated groups and an explicit outcome.

The loop asks a fresh planner (built by `planner_factory` for every run, so no cursor,
counter or decision history survives between runs) for an action, carries it out, and
asks again. Every action — NoOp and terminal ones too — counts as one iteration; when
`max_iterations` is reached the action in hand is not carried out (as in the
reference), but the run ends with status `iteration_limit`, never looking finished.

A `RunAgents` group runs concurrently through the context's executor. Each agent sees
the state as of the group's start; events stream as they arrive and their deltas are
applied in arrival order. Two agents of one group writing the same key is a
`plan_error` naming both: the conflicting keys are restored to their group-start values
by a compensating event, so no racing value survives. An agent that fails ends the run
with `agent_failed` unless `on_agent_error="continue"` lets the planner decide.

`run(ctx)` is a generator of events whose return value is the `PlannerOutcome`; the last
event is always the outcome's `final_event` (its `planner_status` set). As in the
reference, `Done` (and a run with no sub-agents) says nothing: its final event carries the
status as metadata with no content, so no "done after N iterations" line reaches a later
model call, an eval's answer or a transcript; `DoneWithResult` says its result, and a
failed run its error. The outcome and every executed group's decision record their wall
time (`duration_ms`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Literal

import msgspec

from phloem.agents.agent import Agent, call_info
from phloem.agents.context import InvocationContext
from phloem.agents.events import Event, EventActions
from phloem.agents.executor import AgentDone, AgentEvent, GroupExecutor, InlineExecutor
from phloem.agents.hooks import LocalCallback
from phloem.agents.outcome import OK_STATUSES, Decision, OutcomeStatus, PlannerOutcome
from phloem.agents.planners.base import (
    Done,
    DoneWithResult,
    NoOp,
    Planner,
    PlannerAction,
    PlanningContext,
    RunAgents,
)
from phloem.base.logs import get_logger
from phloem.protocols.content import Content, ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.model import Model
from phloem.protocols.secrets import redact

log = get_logger("phloem.agents")

DEFAULT_MAX_ITERATIONS = 100
MAX_ITERATIONS_RANGE = (1, 100_000)
MAX_SUB_AGENTS = 256

PlannerFactory = Callable[[], Planner]
OnAgentError = Literal["stop", "continue"]

_STATUS_KINDS = {s.value for s in OutcomeStatus} - {"done", "done_with_result"}


class _Stop(Exception):
    def __init__(self, status: OutcomeStatus, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details


def _from_error(exc: PhloemError) -> _Stop:
    status = OutcomeStatus(exc.kind) if exc.kind in _STATUS_KINDS else OutcomeStatus.PLAN_ERROR
    return _Stop(status, redact(exc.message), exc.details)


class PlannerAgent(Agent):
    """An agent whose sub-agents are orchestrated by a planner built per run."""

    def __init__(
        self,
        name: str,
        description: str,
        planner_factory: PlannerFactory,
        sub_agents: Sequence[Agent],
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        *,
        on_agent_error: OnAgentError = "stop",
        before_agent_callback: LocalCallback | None = None,
        after_agent_callback: LocalCallback | None = None,
    ) -> None:
        super().__init__(
            name,
            description,
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )
        if isinstance(planner_factory, Planner) or not callable(planner_factory):
            raise TypeError(
                "planner_factory must be a callable returning a new Planner "
                "(planners hold per-run state and are never shared)"
            )
        self.planner_factory = planner_factory
        agents = tuple(sub_agents)
        if len(agents) > MAX_SUB_AGENTS:
            raise ValueError(f"sub_agents must have at most {MAX_SUB_AGENTS} agents")
        names = [a.name for a in agents]
        if len(set(names)) != len(names):
            raise ValueError("sub_agents must have unique names")
        if name in names:
            raise ValueError("a sub-agent must not share the planner agent's name")
        self._sub_agents = agents
        self.max_iterations = check_range("max_iterations", max_iterations, *MAX_ITERATIONS_RANGE)
        if on_agent_error not in ("stop", "continue"):
            raise ValueError("on_agent_error must be 'stop' or 'continue'")
        self.on_agent_error = on_agent_error

    @property
    def sub_agents(self) -> tuple[Agent, ...]:
        return self._sub_agents

    def new_planner(self) -> Planner:
        planner = self.planner_factory()
        if not isinstance(planner, Planner):
            raise PhloemError(
                ErrorKind.PLAN_ERROR,
                f"planner_factory returned {type(planner).__name__}, not a Planner",
            )
        return planner

    def run(self, ctx: InvocationContext) -> Generator[Event, None, PlannerOutcome]:
        return (yield from _PlannerRun(self, ctx).drive())


class _PlannerRun:
    """The state of one run of a `PlannerAgent`."""

    def __init__(self, agent: PlannerAgent, ctx: InvocationContext) -> None:
        self.agent = agent
        self.ctx = ctx
        self.executor: GroupExecutor = ctx.executor or InlineExecutor()
        self.state: dict[str, Any] = dict(ctx.state)
        self.events: list[Event] = list(ctx.events)
        self.decisions: list[Decision] = []
        self.iterations = 0
        self.pctx = PlanningContext(
            agent.sub_agents,
            state=lambda: dict(self.state),
            events=lambda: tuple(self.events),
            user_content=ctx.user_content,
            invocation_id=ctx.invocation_id,
            generate=self.generate if ctx.interceptors else None,
            invocation=ctx,
        )
        self.result: str | None = None
        self.started = time.monotonic()

    def generate(self, model: Model, request: ModelRequest) -> ModelResponse:
        """A model call of the planner (a `SupervisorPlanner`) through the run's chain."""
        info = call_info(self.agent, self.ctx).for_model(model)
        return self.ctx.interceptors.model(info, request, model.generate)

    # -- events ----------------------------------------------------------------------------

    def record(self, event: Event) -> Event:
        self.events.append(event)
        self.state.update(event.actions.state_delta)
        for key in event.actions.state_remove:
            self.state.pop(key, None)
        return event

    def own_event(self, **fields: Any) -> Event:
        return Event(author=self.agent.name, invocation_id=self.ctx.invocation_id, **fields)

    # -- the loop ---------------------------------------------------------------------------

    def drive(self) -> Generator[Event, None, PlannerOutcome]:
        status = OutcomeStatus.DONE
        message = ""
        details: dict[str, Any] | None = None
        try:
            if not self.agent.sub_agents:
                message = "no sub-agents: nothing to do"
            else:
                status, message = yield from self.loop()
        except _Stop as stop:
            status, message, details = stop.status, stop.message, stop.details
        return (yield from self.finish(status, message, details))

    def loop(self) -> Generator[Event, None, tuple[OutcomeStatus, str]]:
        planner = self.call(self.agent.new_planner)
        stale = [k for k in self.call(lambda: planner.stale_keys(self.pctx)) if k in self.state]
        if stale:
            yield self.record(
                self.own_event(
                    content=Content.model("cleared outputs of an earlier run: " + ", ".join(stale)),
                    actions=EventActions(state_remove=tuple(stale)),
                )
            )
        self.call(lambda: planner.init(self.pctx))
        action = self.call(lambda: planner.first_action(self.pctx))
        while True:
            self.check_cancelled()
            if self.iterations >= self.agent.max_iterations:
                self.log_decision(action, executed=False)
                raise _Stop(
                    OutcomeStatus.ITERATION_LIMIT,
                    f"max_iterations ({self.agent.max_iterations}) reached before the planner"
                    f" finished; next action was {_action_name(action)}",
                )
            self.iterations += 1
            self.log_decision(action)
            if isinstance(action, Done):
                break
            if isinstance(action, DoneWithResult):
                self.result = action.result
                break
            if isinstance(action, RunAgents):
                group_started = time.monotonic()
                try:
                    yield from self.run_group(action)
                finally:
                    self.time_decision(group_started)
            elif not isinstance(action, NoOp):
                raise _Stop(
                    OutcomeStatus.PLAN_ERROR,
                    f"planner returned {type(action).__name__}, not a planner action",
                )
            action = self.call(lambda: planner.next_action(self.pctx))
        problem = self.call(lambda: planner.final_check(self.pctx))
        if problem is not None:
            raise _from_error(problem)
        if self.result is not None:
            return OutcomeStatus.DONE_WITH_RESULT, "done with a result"
        return OutcomeStatus.DONE, f"done after {self.iterations} iterations"

    def call(self, fn: Callable[[], Any]) -> Any:
        """Call into the planner; its failures become outcomes, never escapes."""
        try:
            return fn()
        except PhloemError as exc:
            raise _from_error(exc) from None
        except _Stop:
            raise
        except Exception as exc:
            raise _Stop(
                OutcomeStatus.PLAN_ERROR,
                redact(f"planner raised {type(exc).__name__}: {exc}"),
            ) from None

    def find(self, name: str) -> Agent:
        agent: Agent = self.call(lambda: self.pctx.find_agent(name))
        return agent

    def check_cancelled(self) -> None:
        if self.ctx.cancel.cancelled:
            raise _Stop(OutcomeStatus.CANCELLED, f"cancelled: {self.ctx.cancel.reason}")

    def log_decision(self, action: PlannerAction, executed: bool = True) -> None:
        notes, self.pctx.notes[:] = tuple(self.pctx.notes), []
        self.decisions.append(
            Decision(
                iteration=self.iterations if executed else self.iterations + 1,
                action=_action_name(action),
                agents=action.names if isinstance(action, RunAgents) else (),
                result=action.result if isinstance(action, DoneWithResult) else None,
                state_keys=tuple(sorted(self.state)),
                notes=notes,
                executed=executed,
            )
        )

    def time_decision(self, started: float) -> None:
        """Record the wall time of the group the last decision ran."""
        last = self.decisions[-1]
        self.decisions[-1] = msgspec.structs.replace(last, duration_ms=_ms_since(started))

    # -- groups -----------------------------------------------------------------------------

    def run_group(self, action: RunAgents) -> Generator[Event, None, None]:
        if len(set(action.names)) != len(action.names):
            raise _Stop(
                OutcomeStatus.PLAN_ERROR,
                "an agent appears twice in one group: " + ", ".join(action.names),
            )
        agents = [self.find(name) for name in action.names]
        start = dict(self.state)
        history = tuple(self.events)
        # Each agent gets its own deep copy: mutating a nested value in place can neither
        # reach a sibling nor bypass the events.
        invocations = [
            (a, self.ctx.derive(state=copy.deepcopy(start), events=history, executor=self.executor))
            for a in agents
        ]
        writers: dict[str, list[str]] = {}
        failed: dict[str, ErrorValue] = {}
        log.debug("planner_group", agent=self.agent.name, group=list(action.names))
        for item in self.executor.run_group(invocations, self.ctx.cancel):
            if isinstance(item, AgentEvent):
                event = item.event
                for key in (*event.actions.state_delta, *event.actions.state_remove):
                    who = writers.setdefault(key, [])
                    if item.agent not in who:
                        who.append(item.agent)
                if event.error is not None and item.agent not in failed:
                    failed[item.agent] = event.error
                yield self.record(event)
            elif isinstance(item, AgentDone) and item.error is not None:
                failed.setdefault(item.agent, item.error)
                yield self.record(
                    Event(author=item.agent, invocation_id=self.ctx.invocation_id, error=item.error)
                )
        self.check_cancelled()
        order = {n: i for i, n in enumerate(action.names)}
        conflicts = {
            k: sorted(w, key=lambda n: order.get(n, len(order)))
            for k, w in writers.items()
            if len(w) > 1
        }
        if conflicts:
            yield self.record(self.restore(start, conflicts))
            key, who = sorted(conflicts.items())[0]
            raise _Stop(
                OutcomeStatus.PLAN_ERROR,
                f"agents {' and '.join(repr(w) for w in who)} both wrote {key!r} in one group;"
                " the conflicting writes were discarded",
                {"conflicts": {k: list(w) for k, w in sorted(conflicts.items())}},
            )
        if failed and self.agent.on_agent_error == "stop":
            name, error = next(iter(failed.items()))
            raise _Stop(
                OutcomeStatus.AGENT_FAILED,
                f"agent {name!r} failed: {error.kind}: {error.message}",
                {"failed": {n: e.kind for n, e in failed.items()}},
            )

    def restore(self, start: Mapping[str, Any], conflicts: Mapping[str, list[str]]) -> Event:
        return self.own_event(
            content=Content.model(
                "discarded conflicting writes to " + ", ".join(sorted(conflicts))
            ),
            actions=EventActions(
                state_delta={k: start[k] for k in conflicts if k in start},
                state_remove=tuple(sorted(k for k in conflicts if k not in start)),
            ),
        )

    # -- the end ----------------------------------------------------------------------------

    def finish(
        self, status: OutcomeStatus, message: str, details: dict[str, Any] | None
    ) -> Generator[Event, None, PlannerOutcome]:
        error = None
        if status not in OK_STATUSES:
            error = ErrorValue(kind=status.value, message=message, details=details)
        # Done says nothing (the status is metadata); a result or a failure is said.
        text = self.result if self.result is not None else message if error else ""
        final = self.record(
            self.own_event(
                content=Content.model(text) if text else None,
                error=error,
                planner_status=status.value,
            )
        )
        yield final
        log.info(
            "planner_outcome",
            agent=self.agent.name,
            status=status.value,
            iterations=self.iterations,
            replans=self.pctx.replans,
        )
        return PlannerOutcome(
            status=status,
            agent=self.agent.name,
            message=message,
            iterations=self.iterations,
            replans=self.pctx.replans,
            model_calls=self.pctx.model_calls,
            usage=self.pctx.usage,
            decisions=tuple(self.decisions),
            result=self.result,
            error=error,
            final_event=final,
            duration_ms=_ms_since(self.started),
        )


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _action_name(action: object) -> str:
    if isinstance(action, RunAgents):
        return "run_agents"
    if isinstance(action, DoneWithResult):
        return "done_with_result"
    if isinstance(action, Done):
        return "done"
    if isinstance(action, NoOp):
        return "noop"
    return type(action).__name__
