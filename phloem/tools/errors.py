"""`ToolFailure`: how a tool stops with a stable error code.

Inside a tool, failures are raised as `ToolFailure(code, message)`; `Tool.run` turns them
into the failure value `{"error": code, "message": message, ...details}`, so callers never
see an exception for an expected failure. Codes are stable snake_case strings.
"""

from __future__ import annotations

from typing import Any

ERROR_CODES = frozenset(
    {
        "arguments",
        "cancelled",
        "outside_root",
        "missing",
        "directory",
        "not_regular",
        "binary",
        "too_large",
        "never_read",
        "stale",
        "empty_old_text",
        "no_op_edit",
        "no_match",
        "ambiguous_match",
        "budget_exhausted",
        "io",
        "unknown_tool",
        "spawn_failed",
        "no_workspace",
        "exception",
        "denied",
        "not_confirmed",
        "unknown_skill",
        "ambiguous_skill",
        # MCP tools (phloem.actors.mcp): the server's own error result or protocol error,
        # no answer within timeout_s, a server that is suppressed or cannot be reached,
        # and one that stopped during the call
        "tool_error",
        "timeout",
        "unavailable",
        "server_failed",
        # a delegated agent's run (phloem.agents.delegation) ended other than done
        "agent_failed",
        # a durable agent run's tool call that was in flight at a crash (not run again)
        "interrupted",
    }
)
"""Every `error` code a failure value can carry: the built-in tools' codes, `unknown_tool`
(no such tool), `no_workspace` (a workspace tool called without one) and `exception` (a
tool raised something unexpected: `Tool.run`'s answer, with the redacted message);
`denied` (the tool policy refused the call) and `not_confirmed` (confirmation was on
and the owner refused, did not answer in time, or went away) — in both the tool did
not run; `unknown_skill` and `ambiguous_skill` (`load_skill`); `agent_failed` (a delegated agent's
run ended other than done, `phloem.agents.delegation`); `interrupted` (a durable agent
run's tool call in flight when its daemon died: it is never run again on resume)."""


class ToolFailure(Exception):
    """An expected tool failure with a stable `code` and a human message."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details

    def to_value(self) -> dict[str, Any]:
        """The failure value a tool returns: `{"error", "message", ...details}`."""
        return {"error": self.code, "message": self.message, **self.details}
