"""Plugins: tree-wide hooks around runs, agents, model calls and tool calls.

This package's face is the contract only (`phloem.plugins` re-exports it with the rest);
the interceptor, the slots, the stateful instances, the built-ins and the service live in
their own modules.
"""

from phloem.agents.hooks import (
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
    "NOTIFY_ONLY",
    "Amend",
    "Halt",
    "Outcome",
    "Plugin",
    "PluginContext",
    "Return",
    "RunSummary",
    "ToolCall",
    "ToolResult",
]
