"""phloem: a supervised, multi-process runtime for AI-agent workloads.

The public names below are imported lazily, on first use, so that `import phloem` (and
every `phloem` CLI call) stays fast: the agents, model providers and HTTP stack load only
when something asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem._version import __version__
from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.actors.eval.options import EvalOptions as EvalOptions
    from phloem.actors.live.protocol import LiveEvent as LiveEvent
    from phloem.actors.lsp.hub import LspHub as LspHub
    from phloem.actors.mcp.hub import McpHub as McpHub
    from phloem.actors.sessions.durable import DurableSessionService as DurableSessionService
    from phloem.actors.sessions.results import AskResult as AskResult
    from phloem.agents import (
        Agent as Agent,
        AgentMetadata as AgentMetadata,
        AgentRun as AgentRun,
        AStarSearch as AStarSearch,
        Decision as Decision,
        DfsSearch as DfsSearch,
        Done as Done,
        DoneWithResult as DoneWithResult,
        Event as Event,
        EventActions as EventActions,
        FunctionAgent as FunctionAgent,
        FunctionResult as FunctionResult,
        GoalOrientedPlanner as GoalOrientedPlanner,
        InMemorySessionService as InMemorySessionService,
        InvocationContext as InvocationContext,
        LlmAgent as LlmAgent,
        LoopPlanner as LoopPlanner,
        NoOp as NoOp,
        OutcomeStatus as OutcomeStatus,
        P2PPlanner as P2PPlanner,
        ParallelPlanner as ParallelPlanner,
        Planner as Planner,
        PlannerAction as PlannerAction,
        PlannerAgent as PlannerAgent,
        PlannerOutcome as PlannerOutcome,
        PlanningContext as PlanningContext,
        ReplanPolicy as ReplanPolicy,
        RunAgents as RunAgents,
        SequentialPlanner as SequentialPlanner,
        Session as Session,
        SupervisorPlanner as SupervisorPlanner,
    )
    from phloem.client.aio import AsyncClient as AsyncClient
    from phloem.client.sync import Client as Client
    from phloem.instructions import (
        ConfirmationInterceptor as ConfirmationInterceptor,
        InstructionContext as InstructionContext,
        SkillCatalog as SkillCatalog,
        TemplateCatalog as TemplateCatalog,
        ToolPolicy as ToolPolicy,
        ToolPolicyInterceptor as ToolPolicyInterceptor,
    )
    from phloem.models.gemini import GeminiModel as GeminiModel
    from phloem.models.openai import OpenAIModel as OpenAIModel
    from phloem.models.request_planners import (
        BuiltInPlanner as BuiltInPlanner,
        PlanReActPlanner as PlanReActPlanner,
    )
    from phloem.models.scripted import ScriptedModel as ScriptedModel
    from phloem.plugins import (
        Amend as Amend,
        Halt as Halt,
        Plugin as Plugin,
        PluginContext as PluginContext,
        Return as Return,
    )
    from phloem.protocols.content import (
        Content as Content,
        FunctionDeclaration as FunctionDeclaration,
        GenerateConfig as GenerateConfig,
        ModelRequest as ModelRequest,
        ModelResponse as ModelResponse,
        Part as Part,
        RawToolResult as RawToolResult,
        ThinkingConfig as ThinkingConfig,
    )
    from phloem.protocols.credit import CreditWindow as CreditWindow
    from phloem.protocols.errors import (
        ErrorKind as ErrorKind,
        ErrorValue as ErrorValue,
        PhloemError as PhloemError,
    )
    from phloem.protocols.evalreport import EvalReport as EvalReport
    from phloem.protocols.evalset import EvalSet as EvalSet
    from phloem.protocols.model import Model as Model, ModelError as ModelError
    from phloem.protocols.result import PlanningResult as PlanningResult
    from phloem.protocols.runs import (
        ConfirmRequest as ConfirmRequest,
        RunEnd as RunEnd,
        RunEvent as RunEvent,
        RunSummary as RunSummary,
    )
    from phloem.protocols.warnings import RunWarning as RunWarning
    from phloem.tools.toolset import Toolset as Toolset
    from phloem.tree import Tree as Tree

_EXPORTS: dict[str, str] = {
    "AStarSearch": "phloem.agents",
    "Agent": "phloem.agents",
    "Amend": "phloem.plugins",
    "AgentMetadata": "phloem.agents",
    "AgentRun": "phloem.agents",
    "AskResult": "phloem.actors.sessions.results",
    "AsyncClient": "phloem.client.aio",
    "BuiltInPlanner": "phloem.models.request_planners",
    "Client": "phloem.client.sync",
    "ConfirmRequest": "phloem.protocols.runs",
    "ConfirmationInterceptor": "phloem.instructions",
    "Content": "phloem.protocols.content",
    "CreditWindow": "phloem.protocols.credit",
    "Decision": "phloem.agents",
    "DfsSearch": "phloem.agents",
    "Done": "phloem.agents",
    "DurableSessionService": "phloem.actors.sessions.durable",
    "DoneWithResult": "phloem.agents",
    "ErrorKind": "phloem.protocols.errors",
    "EvalOptions": "phloem.actors.eval.options",
    "EvalReport": "phloem.protocols.evalreport",
    "EvalSet": "phloem.protocols.evalset",
    "ErrorValue": "phloem.protocols.errors",
    "Event": "phloem.agents",
    "EventActions": "phloem.agents",
    "FunctionAgent": "phloem.agents",
    "FunctionDeclaration": "phloem.protocols.content",
    "FunctionResult": "phloem.agents",
    "GeminiModel": "phloem.models.gemini",
    "GenerateConfig": "phloem.protocols.content",
    "RawToolResult": "phloem.protocols.content",
    "GoalOrientedPlanner": "phloem.agents",
    "Halt": "phloem.plugins",
    "InMemorySessionService": "phloem.agents",
    "InstructionContext": "phloem.instructions",
    "InvocationContext": "phloem.agents",
    "LiveEvent": "phloem.actors.live.protocol",
    "LlmAgent": "phloem.agents",
    "LoopPlanner": "phloem.agents",
    "LspHub": "phloem.actors.lsp.hub",
    "McpHub": "phloem.actors.mcp.hub",
    "Model": "phloem.protocols.model",
    "ModelError": "phloem.protocols.model",
    "ModelRequest": "phloem.protocols.content",
    "ModelResponse": "phloem.protocols.content",
    "NoOp": "phloem.agents",
    "OpenAIModel": "phloem.models.openai",
    "OutcomeStatus": "phloem.agents",
    "P2PPlanner": "phloem.agents",
    "ParallelPlanner": "phloem.agents",
    "Part": "phloem.protocols.content",
    "PhloemError": "phloem.protocols.errors",
    "PlanReActPlanner": "phloem.models.request_planners",
    "Planner": "phloem.agents",
    "PlannerAction": "phloem.agents",
    "PlannerAgent": "phloem.agents",
    "PlannerOutcome": "phloem.agents",
    "PlanningContext": "phloem.agents",
    "PlanningResult": "phloem.protocols.result",
    "Plugin": "phloem.plugins",
    "PluginContext": "phloem.plugins",
    "ReplanPolicy": "phloem.agents",
    "Return": "phloem.plugins",
    "RunAgents": "phloem.agents",
    "RunEnd": "phloem.protocols.runs",
    "RunEvent": "phloem.protocols.runs",
    "RunSummary": "phloem.protocols.runs",
    "RunWarning": "phloem.protocols.warnings",
    "ScriptedModel": "phloem.models.scripted",
    "SequentialPlanner": "phloem.agents",
    "Session": "phloem.agents",
    "SkillCatalog": "phloem.instructions",
    "SupervisorPlanner": "phloem.agents",
    "TemplateCatalog": "phloem.instructions",
    "ThinkingConfig": "phloem.protocols.content",
    "ToolPolicy": "phloem.instructions",
    "ToolPolicyInterceptor": "phloem.instructions",
    "Toolset": "phloem.tools.toolset",
    "Tree": "phloem.tree",
}

__all__ = [*sorted(_EXPORTS), "__version__"]  # noqa: PLE0604 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
