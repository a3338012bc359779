"""phloem: a supervised, multi-process runtime for AI-agent workloads.

The public names below are imported lazily, on first use, so that `import phloem` (and
every `phloem` CLI call) stays fast: the agents, model providers and HTTP stack load only
when something asks for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from phloem.actors.agents import (
        Agent,
        AgentMetadata,
        AgentRun,
        AStarSearch,
        Decision,
        DfsSearch,
        Done,
        DoneWithResult,
        Event,
        EventActions,
        FunctionAgent,
        FunctionResult,
        GoalOrientedPlanner,
        InMemorySessionService,
        InvocationContext,
        LlmAgent,
        LoopPlanner,
        NoOp,
        OutcomeStatus,
        P2PPlanner,
        ParallelPlanner,
        Planner,
        PlannerAction,
        PlannerAgent,
        PlannerOutcome,
        PlanningContext,
        ReplanPolicy,
        RunAgents,
        SequentialPlanner,
        Session,
        SupervisorPlanner,
    )
    from phloem.client import AsyncClient, Client
    from phloem.models.gemini import GeminiModel
    from phloem.models.openai import OpenAIModel
    from phloem.models.request_planners import BuiltInPlanner, PlanReActPlanner
    from phloem.models.scripted import ScriptedModel
    from phloem.protocols.content import (
        Content,
        FunctionDeclaration,
        GenerateConfig,
        ModelRequest,
        ModelResponse,
        Part,
        ThinkingConfig,
    )
    from phloem.protocols.errors import ErrorValue, PhloemError
    from phloem.protocols.model import Model, ModelError
    from phloem.protocols.plan import PlanningResult
    from phloem.supervision.credit import CreditWindow
    from phloem.tree import Tree

_EXPORTS: dict[str, str] = {
    "AStarSearch": "phloem.actors.agents",
    "Agent": "phloem.actors.agents",
    "AgentMetadata": "phloem.actors.agents",
    "AgentRun": "phloem.actors.agents",
    "AsyncClient": "phloem.client",
    "BuiltInPlanner": "phloem.models.request_planners",
    "Client": "phloem.client",
    "Content": "phloem.protocols.content",
    "CreditWindow": "phloem.supervision.credit",
    "Decision": "phloem.actors.agents",
    "DfsSearch": "phloem.actors.agents",
    "Done": "phloem.actors.agents",
    "DoneWithResult": "phloem.actors.agents",
    "ErrorValue": "phloem.protocols.errors",
    "Event": "phloem.actors.agents",
    "EventActions": "phloem.actors.agents",
    "FunctionAgent": "phloem.actors.agents",
    "FunctionDeclaration": "phloem.protocols.content",
    "FunctionResult": "phloem.actors.agents",
    "GeminiModel": "phloem.models.gemini",
    "GenerateConfig": "phloem.protocols.content",
    "GoalOrientedPlanner": "phloem.actors.agents",
    "InMemorySessionService": "phloem.actors.agents",
    "InvocationContext": "phloem.actors.agents",
    "LlmAgent": "phloem.actors.agents",
    "LoopPlanner": "phloem.actors.agents",
    "Model": "phloem.protocols.model",
    "ModelError": "phloem.protocols.model",
    "ModelRequest": "phloem.protocols.content",
    "ModelResponse": "phloem.protocols.content",
    "NoOp": "phloem.actors.agents",
    "OpenAIModel": "phloem.models.openai",
    "OutcomeStatus": "phloem.actors.agents",
    "P2PPlanner": "phloem.actors.agents",
    "ParallelPlanner": "phloem.actors.agents",
    "Part": "phloem.protocols.content",
    "PhloemError": "phloem.protocols.errors",
    "PlanReActPlanner": "phloem.models.request_planners",
    "Planner": "phloem.actors.agents",
    "PlannerAction": "phloem.actors.agents",
    "PlannerAgent": "phloem.actors.agents",
    "PlannerOutcome": "phloem.actors.agents",
    "PlanningContext": "phloem.actors.agents",
    "PlanningResult": "phloem.protocols.plan",
    "ReplanPolicy": "phloem.actors.agents",
    "RunAgents": "phloem.actors.agents",
    "ScriptedModel": "phloem.models.scripted",
    "SequentialPlanner": "phloem.actors.agents",
    "Session": "phloem.actors.agents",
    "SupervisorPlanner": "phloem.actors.agents",
    "ThinkingConfig": "phloem.protocols.content",
    "Tree": "phloem.tree",
}

__all__ = [
    "AStarSearch",
    "Agent",
    "AgentMetadata",
    "AgentRun",
    "AsyncClient",
    "BuiltInPlanner",
    "Client",
    "Content",
    "CreditWindow",
    "Decision",
    "DfsSearch",
    "Done",
    "DoneWithResult",
    "ErrorValue",
    "Event",
    "EventActions",
    "FunctionAgent",
    "FunctionDeclaration",
    "FunctionResult",
    "GeminiModel",
    "GenerateConfig",
    "GoalOrientedPlanner",
    "InMemorySessionService",
    "InvocationContext",
    "LlmAgent",
    "LoopPlanner",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "NoOp",
    "OpenAIModel",
    "OutcomeStatus",
    "P2PPlanner",
    "ParallelPlanner",
    "Part",
    "PhloemError",
    "PlanReActPlanner",
    "Planner",
    "PlannerAction",
    "PlannerAgent",
    "PlannerOutcome",
    "PlanningContext",
    "PlanningResult",
    "ReplanPolicy",
    "RunAgents",
    "ScriptedModel",
    "SequentialPlanner",
    "Session",
    "SupervisorPlanner",
    "ThinkingConfig",
    "Tree",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'phloem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
