"""`SequentialPlanner`: each sub-agent once, in order, then Done."""

from __future__ import annotations

from phloem.agents.planners.base import Done, Planner, PlannerAction, PlanningContext, RunAgents


class SequentialPlanner(Planner):
    def __init__(self) -> None:
        self._cursor = 0

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        self._cursor = 0
        return self.next_action(ctx)

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        names = ctx.agent_names
        if self._cursor >= len(names):
            return Done()
        name = names[self._cursor]
        self._cursor += 1
        return RunAgents(name)
