"""`phloem.plugins`: the plugin contract in one place (see docs/plugins.md).

    from phloem.plugins import Amend, Halt, Plugin, PluginContext, Return

Plugins are tree-wide hooks around every run, agent invocation, model call and tool call
(`[plugins.NAME]` in the config, `tree.add_plugin(...)` in code); the same outcomes
answer the agents' local callbacks (`LlmAgent(..., before_model_callback=...)`). The
machinery lives in `phloem.actors.plugins`.
"""

from __future__ import annotations

from phloem.actors.plugins.builtins import (
    ContextFilter,
    GlobalInstruction,
    Logging,
    ToolRetry,
    build_builtin,
)
from phloem.actors.plugins.instance import InstanceStatus
from phloem.actors.plugins.interceptor import PluginInterceptor
from phloem.actors.plugins.protocol import PluginInfo
from phloem.actors.plugins.settings import PluginOptions
from phloem.agents.hooks import (
    HOOK_VALUES,
    HOOKS,
    NOTIFY_ONLY,
    Amend,
    Halt,
    Outcome,
    Plugin,
    PluginContext,
    Return,
    RunSummary,
    ToolCall,
    ToolResult,
)

__all__ = [
    "HOOKS",
    "HOOK_VALUES",
    "NOTIFY_ONLY",
    "Amend",
    "ContextFilter",
    "GlobalInstruction",
    "Halt",
    "InstanceStatus",
    "Logging",
    "Outcome",
    "Plugin",
    "PluginContext",
    "PluginInfo",
    "PluginInterceptor",
    "PluginOptions",
    "Return",
    "RunSummary",
    "ToolCall",
    "ToolResult",
    "ToolRetry",
    "build_builtin",
]
