"""`ParallelPlanner`: every sub-agent at once, as one isolated group, then Done."""

from __future__ import annotations

from phloem.agents.planners.base import Done, Planner, PlannerAction, PlanningContext, RunAgents


class ParallelPlanner(Planner):
    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        return RunAgents(*ctx.agent_names) if ctx.agent_names else Done()

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        return Done()
