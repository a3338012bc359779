"""Agents, sessions and the PlannerAgent with its planners.

Pure decision logic (planners, search, templating, outcomes) imports and runs without
starting anything; the supervised executor runs each sub-agent invocation as a
temporary actor under the run's supervisor.
"""

from phloem.actors.agents.agent import Agent
from phloem.actors.agents.context import CancelToken, InvocationContext
from phloem.actors.agents.events import Event, EventActions
from phloem.actors.agents.executor import InlineExecutor
from phloem.actors.agents.function_agent import FunctionAgent, FunctionResult
from phloem.actors.agents.goap import GoalOrientedPlanner, ReplanPolicy
from phloem.actors.agents.goap_search import AStarSearch, DfsSearch
from phloem.actors.agents.llm_agent import LlmAgent, exit_loop
from phloem.actors.agents.loop import LoopPlanner
from phloem.actors.agents.metadata import AgentMetadata
from phloem.actors.agents.outcome import Decision, OutcomeStatus, PlannerOutcome
from phloem.actors.agents.p2p import P2PPlanner
from phloem.actors.agents.parallel import ParallelPlanner
from phloem.actors.agents.planner_agent import PlannerAgent
from phloem.actors.agents.planning import (
    Done,
    DoneWithResult,
    NoOp,
    Planner,
    PlannerAction,
    PlanningContext,
    RunAgents,
)
from phloem.actors.agents.runner import AgentRun, run_agent
from phloem.actors.agents.sequential import SequentialPlanner
from phloem.actors.agents.session import InMemorySessionService, Session
from phloem.actors.agents.supervisor import SupervisorPlanner

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
