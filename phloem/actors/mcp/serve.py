"""phloem as an MCP server: coding tools and agents offered to MCP clients over stdio.

`McpToolServer(registry, ctx, agents)` is an SDK low-level `Server` whose tools are the
registry's tools (confined to the `ToolContext`'s workspace and bounded by its output
policy, exactly as for an agent) and one tool per named agent (`agent_<name>`, taking
`input` and `state`). Every call goes through the one tool contract: a failure value
comes back as an MCP error result whose text is the failure value as JSON; a success as
JSON text plus the same value as structured content. Tools run in worker threads, so a
slow tool never blocks the session. `serve_stdio` runs it on this process's stdio
(`phloem mcp serve`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from phloem._version import __version__
from phloem.tools.contract import JSON, Tool, ToolContext, is_failure, object_schema
from phloem.tools.registry import ToolRegistry

AgentRunner = Callable[[str | None, dict[str, Any]], JSON]
"""(input text, initial state) -> the run's summary (outcome, text, ...)."""

MAX_AGENT_TOOLS = 256
_AGENT_NAME = re.compile(r"[^A-Za-z0-9_-]")


class AgentTool(Tool):
    """A named agent as a tool: runs it to its end and returns its outcome and text."""

    needs_workspace = False

    def __init__(self, agent: str, run: AgentRunner, description: str = "") -> None:
        self.name = "agent_" + _AGENT_NAME.sub("_", agent)[:58]
        self.agent = agent
        self.description = description or f"Run the phloem agent {agent} to its end."
        self.input_schema = object_schema(
            {
                "input": {"type": "string", "description": "The user message."},
                "state": {"type": "object", "description": "Initial session state."},
            },
            [],
        )
        self._run = run

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        summary = self._run(args.get("input"), dict(args.get("state") or {}))
        text = summary.get("text")
        if isinstance(text, str):
            shown, report = ctx.limit(text)
            summary = {**summary, "text": shown, "truncated": report.truncated}
        return summary


def build_server(
    registry: ToolRegistry, ctx: ToolContext, agents: Mapping[str, AgentRunner] | None = None
) -> Server[Any, Any]:
    """The MCP server over `registry` (plus `agents`, each as an `AgentTool`)."""
    tools: dict[str, Tool] = {tool.name: tool for tool in registry.tools()}
    for name, run in list((agents or {}).items())[:MAX_AGENT_TOOLS]:
        agent_tool = AgentTool(name, run)
        tools[agent_tool.name] = agent_tool
    server: Server[Any, Any] = Server("phloem", version=__version__)

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(
                name=tool.name,
                description=tool.description,
                inputSchema=tool.input_schema,
                annotations=types.ToolAnnotations(readOnlyHint=tool.read_only),
            )
            for tool in tools.values()
        ]

    # phloem validates (the one argument check); the SDK's jsonschema check is not needed
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        tool = tools.get(name)
        if tool is None:
            result: JSON = {"error": "unknown_tool", "message": f"no tool named {name[:80]}"}
        else:
            result = await anyio.to_thread.run_sync(tool.run, dict(arguments or {}), ctx)
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structuredContent=None if is_failure(result) else result,
            isError=is_failure(result),
        )

    return server


async def serve_stdio(server: Server[Any, Any]) -> None:
    """Speak MCP on this process's stdin and stdout until the client goes away."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
