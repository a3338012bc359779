"""Messages of the `mcp` service, shared by the service and the client methods."""

from __future__ import annotations

import msgspec

from phloem.protocols.warnings import RunWarning


class ListMcpServers(msgspec.Struct, frozen=True, tag="list"):
    """List the configured servers; with `connect`, connect them first (a tool need)."""

    connect: bool = True


McpRequest = ListMcpServers


class McpToolInfo(msgspec.Struct, frozen=True):
    name: str
    read_only: bool
    description: str


class McpServerInfo(msgspec.Struct, frozen=True):
    name: str
    transport: str  # stdio | http
    state: str  # idle | connecting | connected | restarting | suppressed | login_needed | closed
    failures: int
    restarts: int
    pid: int | None
    error: str
    tools: list[McpToolInfo]


class McpServerList(msgspec.Struct, frozen=True):
    servers: list[McpServerInfo]
    warnings: list[RunWarning] = []
