"""`GoalOrientedPlanner`: plan backwards from a goal key over agent contracts (GOAP).

The plan is a list of groups from a search strategy (`DfsSearch` by default, or
`AStarSearch`); each group runs concurrently. After every group the planner checks
that each agent of it produced its declared output (present *and* valid); a
`ReplanPolicy` decides what a missing output means: carry on (`ignore`), stop with a
result naming what is missing (`fail_stop`), or rebuild the plan from the current state
(`replan(n)`, giving up after n consecutive failures; a group that succeeds resets the
count).

Deliberate differences from the reference: declared output keys are cleared before
planning (`fresh_outputs=True`) so a stale value from an earlier turn is never taken for
new work, and at the end the goal key is checked — a run without a valid goal is
`goal_missing`, never a quiet success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from phloem.agents.metadata import AgentMetadata, OutputCheck, check_unique_outputs
from phloem.agents.planners.base import (
    Done,
    DoneWithResult,
    Planner,
    PlannerAction,
    PlanningContext,
    RunAgents,
)
from phloem.agents.planners.goap_search import DfsSearch, Groups, SearchStrategy
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range

log = get_logger("phloem.agents")

MAX_REPLAN_ATTEMPTS = 100


@dataclass(frozen=True)
class ReplanPolicy:
    """What a missing output means: `ignore()`, `fail_stop()` or `replan(max_attempts)`."""

    kind: Literal["ignore", "fail_stop", "replan"] = "ignore"
    max_attempts: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("ignore", "fail_stop", "replan"):
            raise ValueError("kind must be 'ignore', 'fail_stop' or 'replan'")
        if self.kind == "replan":
            check_range("max_attempts", self.max_attempts, 1, MAX_REPLAN_ATTEMPTS)

    @classmethod
    def ignore(cls) -> ReplanPolicy:
        return cls("ignore")

    @classmethod
    def fail_stop(cls) -> ReplanPolicy:
        return cls("fail_stop")

    @classmethod
    def replan(cls, max_attempts: int) -> ReplanPolicy:
        return cls("replan", max_attempts)


class GoalOrientedPlanner(Planner):
    """Runs the agents the goal needs, level by level, with a replan policy."""

    def __init__(
        self,
        goal: str,
        metadata: Sequence[AgentMetadata],
        search: SearchStrategy | None = None,
        replan: ReplanPolicy | None = None,
        *,
        fresh_outputs: bool = True,
    ) -> None:
        if not isinstance(goal, str) or not goal:
            raise ValueError("goal must be a non-empty string")
        self.goal = goal
        self.metadata = tuple(metadata)
        if not self.metadata:
            raise ValueError("metadata must not be empty")
        check_unique_outputs(self.metadata)
        self.search = search if search is not None else DfsSearch()
        self.replan = replan if replan is not None else ReplanPolicy.ignore()
        self.fresh_outputs = fresh_outputs
        self._check = OutputCheck(self.metadata)
        self._output_of = {m.agent: m.output_key for m in self.metadata}
        self._outputs = frozenset(self._output_of.values())
        self._groups: Groups = []
        self._cursor = 0
        self._failures = 0

    # -- planning without running --------------------------------------------------------

    def groups(self, state_keys: Iterable[str] | Mapping[str, Any]) -> Groups:
        """The groups a run would start with, given these state keys (or this state).

        Mirrors a run: with `fresh_outputs` the declared outputs are not counted as
        present. Raises `PhloemError(kind="plan_error")` for a cycle, an unreachable goal
        or duplicate output keys.
        """
        if isinstance(state_keys, Mapping):
            present = self._check.present_keys(state_keys)
        else:
            present = set(state_keys)
        if self.fresh_outputs:
            present -= self._outputs
        return self.search.search_grouped(self.metadata, present, self.goal)

    # -- Planner ---------------------------------------------------------------------------

    def stale_keys(self, ctx: PlanningContext) -> Sequence[str]:
        if not self.fresh_outputs:
            return ()
        return sorted(k for k in self._outputs if k in ctx.state)

    def init(self, ctx: PlanningContext) -> None:
        self._build(ctx)
        self._failures = 0

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        self._cursor = 0
        return self._select()

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        if self._cursor > 0 and self._groups:
            missing = self._missing(self._groups[self._cursor - 1], ctx)
            if not missing:
                self._failures = 0
            elif self.replan.kind == "fail_stop":
                return DoneWithResult(
                    "stopped: missing outputs from the previous group: " + ", ".join(missing)
                )
            elif self.replan.kind == "replan":
                if self._failures >= self.replan.max_attempts:
                    return DoneWithResult(
                        f"stopped: max replan attempts ({self.replan.max_attempts}) exhausted;"
                        " still missing: " + ", ".join(missing)
                    )
                self._failures += 1
                ctx.record_replan(
                    f"replan {self._failures}/{self.replan.max_attempts}: missing "
                    + ", ".join(missing)
                )
                try:
                    self._build(ctx)
                except PhloemError as exc:
                    return DoneWithResult(f"replanning failed: {exc.message}")
                if not self._groups:
                    return Done()
                log.info("goap_replanned", groups=self._groups)
        return self._select()

    def final_check(self, ctx: PlanningContext) -> PhloemError | None:
        state = ctx.state
        if self.goal not in state:
            return PhloemError(
                ErrorKind.GOAL_MISSING, f"goal key {self.goal!r} is missing at the end of the run"
            )
        if not self._check.present(state, self.goal):
            return PhloemError(
                ErrorKind.GOAL_MISSING,
                f"goal key {self.goal!r} holds a value that fails validation",
            )
        return None

    # -- internals -------------------------------------------------------------------------

    def _build(self, ctx: PlanningContext) -> None:
        present = self._check.present_keys(ctx.state)
        self._groups = self.search.search_grouped(self.metadata, present, self.goal)
        self._cursor = 0
        for group in self._groups:
            for name in group:
                ctx.find_agent(name)
        log.info("goap_plan", goal=self.goal, groups=self._groups)

    def _missing(self, group: Sequence[str], ctx: PlanningContext) -> list[str]:
        state = ctx.state
        return [
            f"{name} -> {self._output_of[name]}"
            for name in group
            if not self._check.present(state, self._output_of[name])
        ]

    def _select(self) -> PlannerAction:
        if self._cursor >= len(self._groups):
            return Done()
        group = self._groups[self._cursor]
        self._cursor += 1
        return RunAgents(*group)
