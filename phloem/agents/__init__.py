"""Agents, sessions and the PlannerAgent with its planners.

Pure decision logic (planners, search, templating, outcomes) imports and runs without
starting anything; the supervised executor runs each sub-agent invocation as a
temporary actor under the run's supervisor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.agents.agent import (
        Agent as Agent,
    )
    from phloem.agents.context import (
        CancelToken as CancelToken,
        InvocationContext as InvocationContext,
    )
    from phloem.agents.events import (
        Event as Event,
        EventActions as EventActions,
    )
    from phloem.agents.executor import (
        InlineExecutor as InlineExecutor,
    )
    from phloem.agents.function_agent import (
        FunctionAgent as FunctionAgent,
        FunctionResult as FunctionResult,
    )
    from phloem.agents.llm_agent import (
        LlmAgent as LlmAgent,
        exit_loop as exit_loop,
    )
    from phloem.agents.metadata import (
        AgentMetadata as AgentMetadata,
    )
    from phloem.agents.outcome import (
        Decision as Decision,
        OutcomeStatus as OutcomeStatus,
        PlannerOutcome as PlannerOutcome,
    )
    from phloem.agents.planner_agent import (
        PlannerAgent as PlannerAgent,
    )
    from phloem.agents.planners.base import (
        Done as Done,
        DoneWithResult as DoneWithResult,
        NoOp as NoOp,
        Planner as Planner,
        PlannerAction as PlannerAction,
        PlanningContext as PlanningContext,
        RunAgents as RunAgents,
    )
    from phloem.agents.planners.goap import (
        GoalOrientedPlanner as GoalOrientedPlanner,
        ReplanPolicy as ReplanPolicy,
    )
    from phloem.agents.planners.goap_search import (
        AStarSearch as AStarSearch,
        DfsSearch as DfsSearch,
    )
    from phloem.agents.planners.llm_supervisor import (
        SupervisorPlanner as SupervisorPlanner,
    )
    from phloem.agents.planners.loop import (
        LoopPlanner as LoopPlanner,
    )
    from phloem.agents.planners.p2p import (
        P2PPlanner as P2PPlanner,
    )
    from phloem.agents.planners.parallel import (
        ParallelPlanner as ParallelPlanner,
    )
    from phloem.agents.planners.sequential import (
        SequentialPlanner as SequentialPlanner,
    )
    from phloem.agents.runner import (
        AgentRun as AgentRun,
        run_agent as run_agent,
    )
    from phloem.agents.session import (
        InMemorySessionService as InMemorySessionService,
        Session as Session,
    )

_EXPORTS: dict[str, str] = {
    "AStarSearch": "phloem.agents.planners.goap_search",
    "Agent": "phloem.agents.agent",
    "AgentMetadata": "phloem.agents.metadata",
    "AgentRun": "phloem.agents.runner",
    "CancelToken": "phloem.agents.context",
    "Decision": "phloem.agents.outcome",
    "DfsSearch": "phloem.agents.planners.goap_search",
    "Done": "phloem.agents.planners.base",
    "DoneWithResult": "phloem.agents.planners.base",
    "Event": "phloem.agents.events",
    "EventActions": "phloem.agents.events",
    "FunctionAgent": "phloem.agents.function_agent",
    "FunctionResult": "phloem.agents.function_agent",
    "GoalOrientedPlanner": "phloem.agents.planners.goap",
    "InMemorySessionService": "phloem.agents.session",
    "InlineExecutor": "phloem.agents.executor",
    "InvocationContext": "phloem.agents.context",
    "LlmAgent": "phloem.agents.llm_agent",
    "LoopPlanner": "phloem.agents.planners.loop",
    "NoOp": "phloem.agents.planners.base",
    "OutcomeStatus": "phloem.agents.outcome",
    "P2PPlanner": "phloem.agents.planners.p2p",
    "ParallelPlanner": "phloem.agents.planners.parallel",
    "Planner": "phloem.agents.planners.base",
    "PlannerAction": "phloem.agents.planners.base",
    "PlannerAgent": "phloem.agents.planner_agent",
    "PlannerOutcome": "phloem.agents.outcome",
    "PlanningContext": "phloem.agents.planners.base",
    "ReplanPolicy": "phloem.agents.planners.goap",
    "RunAgents": "phloem.agents.planners.base",
    "SequentialPlanner": "phloem.agents.planners.sequential",
    "Session": "phloem.agents.session",
    "SupervisorPlanner": "phloem.agents.planners.llm_supervisor",
    "exit_loop": "phloem.agents.llm_agent",
    "run_agent": "phloem.agents.runner",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
