"""`phloem.plugins`: the plugin contract in one place (see docs/plugins.md).

    from phloem.plugins import Amend, Halt, Plugin, PluginContext, Return

Plugins are tree-wide hooks around every run, agent invocation, model call and tool call
(`[plugins.NAME]` in the config, `tree.add_plugin(...)` in code); the same outcomes
answer the agents' local callbacks (`LlmAgent(..., before_model_callback=...)`). The
machinery lives in `phloem.actors.plugins`.
"""

# ruff: noqa: PLC0414 (a face: `import X as X` marks the re-exports for type checkers)
from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.actors.plugins.builtins import (
        ContextFilter as ContextFilter,
        GlobalInstruction as GlobalInstruction,
        Logging as Logging,
        ToolRetry as ToolRetry,
        build_builtin as build_builtin,
    )
    from phloem.actors.plugins.interceptor import (
        PluginInterceptor as PluginInterceptor,
    )
    from phloem.actors.plugins.protocol import (
        InstanceStatus as InstanceStatus,
        PluginInfo as PluginInfo,
    )
    from phloem.actors.plugins.settings import (
        PluginOptions as PluginOptions,
    )
    from phloem.agents.hooks import (
        HOOK_VALUES as HOOK_VALUES,
        HOOKS as HOOKS,
        NOTIFY_ONLY as NOTIFY_ONLY,
        Amend as Amend,
        Halt as Halt,
        Outcome as Outcome,
        Plugin as Plugin,
        PluginContext as PluginContext,
        Return as Return,
        RunSummary as RunSummary,
        ToolCall as ToolCall,
        ToolResult as ToolResult,
    )

_EXPORTS: dict[str, str] = {
    "Amend": "phloem.agents.hooks",
    "ContextFilter": "phloem.actors.plugins.builtins",
    "GlobalInstruction": "phloem.actors.plugins.builtins",
    "HOOKS": "phloem.agents.hooks",
    "HOOK_VALUES": "phloem.agents.hooks",
    "Halt": "phloem.agents.hooks",
    "InstanceStatus": "phloem.actors.plugins.protocol",
    "Logging": "phloem.actors.plugins.builtins",
    "NOTIFY_ONLY": "phloem.agents.hooks",
    "Outcome": "phloem.agents.hooks",
    "Plugin": "phloem.agents.hooks",
    "PluginContext": "phloem.agents.hooks",
    "PluginInfo": "phloem.actors.plugins.protocol",
    "PluginInterceptor": "phloem.actors.plugins.interceptor",
    "PluginOptions": "phloem.actors.plugins.settings",
    "Return": "phloem.agents.hooks",
    "RunSummary": "phloem.agents.hooks",
    "ToolCall": "phloem.agents.hooks",
    "ToolResult": "phloem.agents.hooks",
    "ToolRetry": "phloem.actors.plugins.builtins",
    "build_builtin": "phloem.actors.plugins.builtins",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
