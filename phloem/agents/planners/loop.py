"""`LoopPlanner`: the sub-agents in order, `max_cycles` full passes, or until escalation.

One agent runs per action. A pass that reaches the end of the list starts the next
cycle; after `max_cycles` passes (at least one) the planner is Done. Unlike the
reference, which looks only at the very last event, an escalation in ANY event produced
since the previous decision stops the loop, so an escalation followed by another event
is never missed.
"""

from __future__ import annotations

from phloem.agents.planners.base import Done, Planner, PlannerAction, PlanningContext, RunAgents
from phloem.protocols.limits import check_range

MAX_CYCLES = 1_000_000


class LoopPlanner(Planner):
    def __init__(self, max_cycles: int) -> None:
        self.max_cycles = check_range("max_cycles", max_cycles, None, MAX_CYCLES)
        self._cursor = 0
        self._cycle = 0
        self._seen = 0

    def init(self, ctx: PlanningContext) -> None:
        self._cursor = 0
        self._cycle = 0

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        self._cursor = 0
        self._cycle = 0
        return self._select(ctx)

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        events = ctx.events
        if any(e.actions.escalate for e in events[self._seen :]):
            escalated = next(e for e in events[self._seen :] if e.actions.escalate)
            ctx.note(f"escalation by {escalated.author}")
            return Done()
        return self._select(ctx)

    def _select(self, ctx: PlanningContext) -> PlannerAction:
        names = ctx.agent_names
        self._seen = len(ctx.events)
        if not names:
            return Done()
        index = self._cursor
        self._cursor += 1
        if index >= len(names):
            self._cycle += 1
            if self._cycle >= self.max_cycles:
                return Done()
            self._cursor = 1
            index = 0
        return RunAgents(names[index])
