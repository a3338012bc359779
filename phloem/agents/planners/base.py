"""The planner contract: actions, `PlanningContext` and the `Planner` base class.

A planner decides; it never runs anything itself. The `PlannerAgent` loop calls `init`,
then `first_action`, then `next_action` after every action until a terminal one. To fail
a run loudly a planner raises `PhloemError`; its `kind` becomes the outcome status when
it is one (`plan_error`, `model_failed`, `goal_missing`, `iteration_limit`), otherwise
the run ends with `plan_error`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from phloem.agents.events import Event
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Usage
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.model import Model

if TYPE_CHECKING:
    from phloem.agents.agent import Agent
    from phloem.agents.context import InvocationContext


@dataclass(frozen=True, init=False)
class RunAgents:
    """Run these agents next, as one concurrent, isolated group."""

    names: tuple[str, ...]

    def __init__(self, *agents: str | Agent | Iterable[str | Agent]) -> None:
        flat: list[str] = []
        for item in agents:
            if isinstance(item, str):
                flat.append(item)
            elif hasattr(item, "name") and isinstance(item.name, str):
                flat.append(item.name)
            else:
                flat.extend(a if isinstance(a, str) else a.name for a in item)  # type: ignore[union-attr]
        if not flat:
            raise ValueError("names must not be empty")
        object.__setattr__(self, "names", tuple(flat))


@dataclass(frozen=True)
class Done:
    """Stop; nothing more to say."""


@dataclass(frozen=True)
class DoneWithResult:
    """Stop with a result text, emitted as one event authored by the planner agent."""

    result: str


@dataclass(frozen=True)
class NoOp:
    """Ask again at once (counts as an iteration)."""


PlannerAction: TypeAlias = RunAgents | Done | DoneWithResult | NoOp


ModelCall: TypeAlias = Callable[[Model, ModelRequest], ModelResponse]


class PlanningContext:
    """A planner's view: state, events, the available agents and the original request.

    It also carries the run's counters that planners report into: model calls and
    tokens (`record_model_call`), replans (`record_replan`) and notes for the decision
    log (`note`).
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        state: Callable[[], Mapping[str, Any]],
        events: Callable[[], tuple[Event, ...]],
        user_content: Content | None = None,
        invocation_id: str = "",
        generate: ModelCall | None = None,
        invocation: InvocationContext | None = None,
    ) -> None:
        self._invocation = invocation
        self._agents = tuple(agents)
        self._generate = generate
        self._by_name = {a.name: a for a in self._agents}
        self._state = state
        self._events = events
        self.user_content = user_content
        self.invocation_id = invocation_id
        self.model_calls = 0
        self.usage = Usage()
        self.replans = 0
        self.notes: list[str] = []

    def generate(self, model: Model, request: ModelRequest) -> ModelResponse:
        """One model call of the planner, through the run's interceptors (plugins)."""
        if self._generate is None:
            return model.generate(request)
        return self._generate(model, request)

    @property
    def state(self) -> Mapping[str, Any]:
        """The current state (read-only snapshot)."""
        return self._state()

    @property
    def invocation_context(self) -> InvocationContext | None:
        """The planner agent's invocation (session, app, user, cancel token, executor) as
        the run started it; `state` and `events` here are the current ones. None for a
        context built outside a run."""
        return self._invocation

    @property
    def events(self) -> tuple[Event, ...]:
        return self._events()

    @property
    def available_agents(self) -> tuple[Agent, ...]:
        return self._agents

    @property
    def agent_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self._agents)

    @property
    def user_text(self) -> str:
        return self.user_content.text if self.user_content is not None else ""

    def find_agent(self, name: str) -> Agent:
        """The sub-agent called `name`; `plan_error` naming the available ones if none."""
        try:
            return self._by_name[name]
        except KeyError:
            raise PhloemError(
                ErrorKind.PLAN_ERROR,
                f"unknown agent {name!r} (available: {', '.join(self.agent_names)})",
                {"agent": name},
            ) from None

    def record_model_call(self, usage: Usage | None = None) -> None:
        self.model_calls += 1
        if usage is not None:
            self.usage = self.usage + usage

    def record_replan(self, note: str | None = None) -> None:
        self.replans += 1
        if note:
            self.note(note)

    def note(self, text: str) -> None:
        self.notes.append(text)


class Planner(abc.ABC):
    """Base class of planners. Build one per run (a `PlannerAgent` takes a factory)."""

    def init(self, ctx: PlanningContext) -> None:  # noqa: B027 - optional hook
        """Called once before `first_action`."""

    @abc.abstractmethod
    def first_action(self, ctx: PlanningContext) -> PlannerAction: ...

    @abc.abstractmethod
    def next_action(self, ctx: PlanningContext) -> PlannerAction: ...

    def stale_keys(self, ctx: PlanningContext) -> Sequence[str]:
        """State keys to remove before `init` (their values are from an earlier run)."""
        return ()

    def final_check(self, ctx: PlanningContext) -> PhloemError | None:
        """After a Done/DoneWithResult: an error if the run did not achieve its aim."""
        return None
