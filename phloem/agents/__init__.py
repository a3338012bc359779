"""Agents, sessions and the PlannerAgent with its planners.

Pure decision logic (planners, search, templating, outcomes) imports and runs without
starting anything; the supervised executor runs each sub-agent invocation as a
temporary actor under the run's supervisor.
"""

from phloem.agents.agent import Agent
from phloem.agents.context import CancelToken, InvocationContext
from phloem.agents.events import Event, EventActions
from phloem.agents.executor import InlineExecutor
from phloem.agents.function_agent import FunctionAgent, FunctionResult
from phloem.agents.llm_agent import LlmAgent, exit_loop
from phloem.agents.metadata import AgentMetadata
from phloem.agents.outcome import Decision, OutcomeStatus, PlannerOutcome
from phloem.agents.planner_agent import PlannerAgent
from phloem.agents.planners.base import (
    Done,
    DoneWithResult,
    NoOp,
    Planner,
    PlannerAction,
    PlanningContext,
    RunAgents,
)
from phloem.agents.planners.goap import GoalOrientedPlanner, ReplanPolicy
from phloem.agents.planners.goap_search import AStarSearch, DfsSearch
from phloem.agents.planners.llm_supervisor import SupervisorPlanner
from phloem.agents.planners.loop import LoopPlanner
from phloem.agents.planners.p2p import P2PPlanner
from phloem.agents.planners.parallel import ParallelPlanner
from phloem.agents.planners.sequential import SequentialPlanner
from phloem.agents.runner import AgentRun, run_agent
from phloem.agents.session import InMemorySessionService, Session

__all__ = [
    "AStarSearch",
    "Agent",
    "AgentMetadata",
    "AgentRun",
    "CancelToken",
    "Decision",
    "DfsSearch",
    "Done",
    "DoneWithResult",
    "Event",
    "EventActions",
    "FunctionAgent",
    "FunctionResult",
    "GoalOrientedPlanner",
    "InMemorySessionService",
    "InlineExecutor",
    "InvocationContext",
    "LlmAgent",
    "LoopPlanner",
    "NoOp",
    "OutcomeStatus",
    "P2PPlanner",
    "ParallelPlanner",
    "Planner",
    "PlannerAction",
    "PlannerAgent",
    "PlannerOutcome",
    "PlanningContext",
    "ReplanPolicy",
    "RunAgents",
    "SequentialPlanner",
    "Session",
    "SupervisorPlanner",
    "exit_loop",
    "run_agent",
]
