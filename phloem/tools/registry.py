"""`ToolRegistry`: tools by name, and the default registry of the coding tools."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from phloem.protocols.content import FunctionDeclaration
from phloem.tools.contract import JSON, Tool, ToolContext, unknown_tool
from phloem.tools.settings import ToolsConfig
from phloem.tools.workspace import Workspace

MAX_TOOLS = 1024
"""Most tools one registry holds (plasmid caps MCP toolsets at 256 per server)."""


class ToolRegistry:
    """Tools by unique name, in registration order; thread-safe."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._lock = threading.Lock()
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add `tool`; a second tool with the same name is a ValueError."""
        name = tool.name
        if not name or not all(ch.isalnum() or ch in "_-" for ch in name) or len(name) > 64:
            raise ValueError("name must be 1-64 characters of letters, digits, _ or -")
        schema = tool.input_schema
        if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
            raise ValueError(f"input_schema of {name} must be an object schema without extras")
        with self._lock:
            if name in self._tools:
                raise ValueError(f"a tool named {name} is already registered")
            if len(self._tools) >= MAX_TOOLS:
                raise ValueError(f"a registry holds at most {MAX_TOOLS} tools")
            self._tools[name] = tool

    def get(self, name: str) -> Tool | None:
        with self._lock:
            return self._tools.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return list(self._tools)

    def tools(self) -> list[Tool]:
        with self._lock:
            return list(self._tools.values())

    def read_only(self) -> ToolRegistry:
        """A registry of just the tools that never change the workspace."""
        return ToolRegistry(tool for tool in self.tools() if tool.read_only)

    def describe(self) -> list[JSON]:
        return [tool.describe() for tool in self.tools()]

    def declarations(self) -> tuple[FunctionDeclaration, ...]:
        """Every tool as a model-facing function declaration, in registration order."""
        return tuple(tool.declaration() for tool in self.tools())

    def run(self, name: str, args: Any, ctx: ToolContext) -> JSON:
        """Run tool `name`; an unknown name is the failure value `unknown_tool`."""
        tool = self.get(name)
        if tool is None:
            return unknown_tool(name)
        return tool.run(args, ctx)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        with self._lock:
            return len(self._tools)


def coding_tools(settings: ToolsConfig | None = None) -> list[Tool]:
    """Fresh instances of the seven coding tools, in plasmid's order, with the limits of
    a `[tools]` config section (`config.tools`; the defaults without one)."""
    from phloem.tools.bash import BashTool
    from phloem.tools.edit import EditTool
    from phloem.tools.find import FindTool
    from phloem.tools.grep import GrepTool
    from phloem.tools.ls import LsTool
    from phloem.tools.read import ReadTool
    from phloem.tools.write import WriteTool

    settings = settings if settings is not None else ToolsConfig()
    bash = BashTool(
        max_memory_bytes=settings.bash_max_memory_bytes,
        default_timeout_ms=settings.bash_timeout_ms,
        max_timeout_ms=settings.bash_max_timeout_ms,
    )
    return [ReadTool(), WriteTool(), EditTool(), bash, GrepTool(), FindTool(), LsTool()]


def default_registry(settings: ToolsConfig | None = None) -> ToolRegistry:
    """A registry holding read, write, edit, bash, grep, find and ls (configured by a
    `[tools]` section, `config.tools`, when one is given)."""
    return ToolRegistry(coding_tools(settings))


def run_tool(
    name: str,
    args: Any,
    root: str | Path,
    *,
    session: str = "default",
    registry: ToolRegistry | None = None,
) -> JSON:
    """Run one tool by name in a fresh `Workspace` at `root` (a one-off call)."""
    chosen = registry if registry is not None else default_registry()
    ctx = ToolContext(workspace=Workspace(root), session=session)
    return chosen.run(name, args, ctx)
