"""`McpToolset`: the tools of some configured MCP servers, for an `LlmAgent`.

`[agents.llm.NAME] mcp_servers = ["files", "search"]` gives the agent one toolset over
those servers; at each run it asks the tree's hub for their tools, which connects them
at that first need. A server that cannot be reached contributes no tools (the hub keeps
a warning); an unknown server name is a configuration error at start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from phloem.actors.mcp.settings import McpConfig
from phloem.tools.contract import Tool
from phloem.tools.toolset import Toolset


class McpToolset(Toolset):
    """The tools of `servers`, from the hub in `shared` (`ServiceContext.shared`)."""

    def __init__(self, shared: dict[str, Any], servers: Sequence[str], config: McpConfig) -> None:
        known = {*config.servers, *config.allow_foreign}
        unknown = [name for name in servers if name not in known]
        if unknown:
            raise ValueError(f"mcp_servers names unconfigured MCP servers: {', '.join(unknown)}")
        self.name = "mcp:" + ",".join(servers)
        self.servers = list(servers)
        self._shared = shared

    def tools(self) -> list[Tool]:
        from phloem.actors.mcp.hub import hub_of  # the SDK loads at the first need

        hub = hub_of(self._shared)
        return list(hub.tools(self.servers)) if hub is not None else []
