"""MCP client methods: `list_mcp_servers` (sync and async share the request)."""

from __future__ import annotations

from phloem.actors.mcp.protocol import ListMcpServers, McpServerList
from phloem.client.base import AsyncClientBase, ClientBase

MCP_SERVICE = "mcp/service"


def _request(connect: bool) -> ListMcpServers:
    return ListMcpServers(connect=bool(connect))


class McpClientMethods(ClientBase):
    def list_mcp_servers(
        self, *, connect: bool = True, timeout: float | None = None
    ) -> McpServerList:
        """The configured MCP servers with state and tools; `connect` connects them first
        (`unknown_actor` when the daemon has no `[mcp.servers]`)."""
        result: McpServerList = self.ask(
            MCP_SERVICE, _request(connect), timeout=timeout, reply_type=McpServerList
        )
        return result


class AsyncMcpMethods(AsyncClientBase):
    """The MCP methods of `AsyncClient`, as coroutines."""

    async def list_mcp_servers(
        self, *, connect: bool = True, timeout: float | None = None
    ) -> McpServerList:
        result: McpServerList = await self.ask(
            MCP_SERVICE, _request(connect), timeout=timeout, reply_type=McpServerList
        )
        return result
