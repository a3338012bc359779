"""`P2PPlanner`: agents activate as their inputs appear, and again when they change.

Every agent starts armed. A wave runs every armed agent whose input keys are all present
(and valid, when its contract has a validator); running disarms it. After each wave, any
declared output key whose value changed re-arms the agents that read it. The run ends
when a wave would be empty, when `max_invocations` is reached (checked before a wave, so
the last wave may overshoot, as in the reference), or when `exit_condition(state,
invocations)` holds before a decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from phloem.agents.metadata import AgentMetadata, OutputCheck
from phloem.agents.planners.base import Done, Planner, PlannerAction, PlanningContext, RunAgents
from phloem.protocols.limits import check_range

ExitCondition = Callable[[Mapping[str, Any], int], bool]
MAX_INVOCATIONS = 1_000_000


class P2PPlanner(Planner):
    def __init__(
        self,
        metadata: Sequence[AgentMetadata],
        max_invocations: int,
        exit_condition: ExitCondition | None = None,
    ) -> None:
        check_range("max_invocations", max_invocations, 1, MAX_INVOCATIONS)
        self.metadata = tuple(metadata)
        if not self.metadata:
            raise ValueError("metadata must not be empty")
        self.max_invocations = max_invocations
        self.exit_condition = exit_condition
        self._check = OutputCheck(self.metadata)
        self._armed: dict[str, bool] = {}
        self._snapshot: dict[str, Any] = {}
        self.invocations = 0

    def init(self, ctx: PlanningContext) -> None:
        self._armed = {m.agent: True for m in self.metadata}
        self.invocations = 0
        state = ctx.state
        self._snapshot = {
            m.output_key: state[m.output_key]
            for m in self.metadata
            if state.get(m.output_key) is not None
        }

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        return self._wave(ctx)

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        state = ctx.state
        if self.exit_condition is not None and self.exit_condition(state, self.invocations):
            ctx.note(f"exit condition met after {self.invocations} invocations")
            return Done()
        for m in self.metadata:
            value = state.get(m.output_key)
            if value is None or self._snapshot.get(m.output_key) == value:
                continue
            self._snapshot[m.output_key] = value
            for reader in self.metadata:
                if m.output_key in reader.input_keys:
                    self._armed[reader.agent] = True
        return self._wave(ctx)

    def _wave(self, ctx: PlanningContext) -> PlannerAction:
        if self.invocations >= self.max_invocations:
            ctx.note(f"max_invocations ({self.max_invocations}) reached")
            return Done()
        state = ctx.state
        ready = [
            m.agent
            for m in self.metadata
            if self._armed.get(m.agent) and all(self._check.present(state, k) for k in m.input_keys)
        ]
        for name in ready:
            ctx.find_agent(name)
            self._armed[name] = False
        self.invocations += len(ready)
        return RunAgents(*ready) if ready else Done()
