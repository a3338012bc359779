"""MCP server tools behind the one tool contract: naming, bounds and results.

A server tool `search` of server `docs` becomes the phloem tool `mcp__docs__search`:
characters other than ASCII letters, digits and `_` become `_`, and the name is cut to
`MAX_TOOL_NAME_BYTES`. Two tools of one server that end with the same name are both
dropped (neither could be called unambiguously), a tool whose input schema encodes to
more than `MAX_SCHEMA_BYTES` is dropped, and past `MAX_TOOLS_PER_SERVER` the rest are
dropped — each with a `RunWarning`. The tool's `readOnlyHint` annotation is kept as
`read_only` (the confirmation policy reads it).

A call returns `{"content": TEXT, "structured": VALUE?, "truncated": bool}`: the text
blocks joined (other blocks named by kind), bounded by the caller's output policy and
budget; a result the server marks `isError` is the failure value `tool_error`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from mcp import types

from phloem.protocols.warnings import RunWarning
from phloem.tools.contract import JSON, Tool, ToolContext
from phloem.tools.errors import ToolFailure

MAX_TOOL_NAME_BYTES = 64
MAX_TOOLS_PER_SERVER = 256
MAX_SCHEMA_BYTES = 64 * 1024
PREFIX = "mcp"

_NON_WORD = re.compile(r"[^A-Za-z0-9_]")

CallFn = Callable[[str, str, JSON], types.CallToolResult]
"""(server, tool, arguments) -> the server's result; raises `ToolFailure` on failure."""


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, non-word characters as `_`, at most 64 bytes."""
    name = _NON_WORD.sub("_", f"{PREFIX}__{server}__{tool}")
    return name[:MAX_TOOL_NAME_BYTES]


def exact_schema(schema: dict[str, Any]) -> JSON:
    """The server's input schema as an exact object schema (the contract's shape)."""
    out = dict(schema)
    out["type"] = "object"
    out.setdefault("properties", {})
    out["additionalProperties"] = False
    return out


class McpTool(Tool):
    """One server tool; `call` goes through the hub to the server's session."""

    needs_workspace = False

    def __init__(self, server: str, remote: types.Tool, call: CallFn) -> None:
        self.server = server
        self.remote_name = remote.name
        self.name = tool_name(server, remote.name)
        self.description = (remote.description or remote.title or "")[:4096]
        self.input_schema = exact_schema(remote.input_schema)
        hints = remote.annotations
        # An instance attribute shadowing the class default: policy reads `tool.read_only`.
        self.read_only = bool(hints is not None and hints.read_only_hint)  # type: ignore[misc]
        self._call = call

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        ctx.check_cancelled()
        result = self._call(self.server, self.remote_name, args)
        text = render_content(result.content)
        if result.is_error:
            raise ToolFailure("tool_error", text[:4096] or "the MCP tool reported an error")
        shown, report = ctx.limit(text)
        out: JSON = {"content": shown, "truncated": report.truncated}
        if result.structured_content is not None:
            structured = json.dumps(result.structured_content)
            if len(structured) <= ctx.policy.max_bytes or ctx.policy.max_bytes <= 0:
                out["structured"] = result.structured_content
            else:
                out["truncated"] = True
        return out


def render_content(blocks: Sequence[types.ContentBlock]) -> str:
    """The text of a result's content blocks; other kinds are named, not inlined."""
    parts = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource: {resource.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    return "\n".join(parts)


def build_tools(
    server: str, listed: Sequence[types.Tool], call: CallFn
) -> tuple[list[McpTool], list[RunWarning]]:
    """The server's tools under the bounds of the module docstring, and the warnings."""
    warnings: list[RunWarning] = []
    kept: list[types.Tool] = []
    for remote in listed:
        if len(kept) >= MAX_TOOLS_PER_SERVER:
            warnings.append(
                RunWarning.of(
                    "mcp_too_many_tools",
                    f"MCP server {server}: more than {MAX_TOOLS_PER_SERVER} tools; "
                    f"{len(listed) - MAX_TOOLS_PER_SERVER} dropped",
                )
            )
            break
        size = len(json.dumps(remote.input_schema).encode())
        if size > MAX_SCHEMA_BYTES:
            warnings.append(
                RunWarning.of(
                    "mcp_schema_too_large",
                    f"MCP server {server}: tool {remote.name[:80]} has an input schema of "
                    f"{size} bytes (limit {MAX_SCHEMA_BYTES}); dropped",
                )
            )
            continue
        kept.append(remote)
    counts = Counter(tool_name(server, remote.name) for remote in kept)
    tools = []
    for remote in kept:
        name = tool_name(server, remote.name)
        if counts[name] > 1:
            warnings.append(
                RunWarning.of(
                    "mcp_name_collision",
                    f"MCP server {server}: tool {remote.name[:80]} maps to {name}, "
                    "as another tool does; both dropped",
                )
            )
            continue
        tools.append(McpTool(server, remote, call))
    return tools, warnings
