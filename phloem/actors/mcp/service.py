"""The `mcp` service: the tree's MCP hub, its stdio servers' supervisor, `mcp list`.

    mcp                 supervisor (one_for_one), when `[mcp]` names servers (or foreign ones)
    ├── servers         supervisor: one temporary process child per running stdio server
    └── service         answers `ListMcpServers`

The hub (`hub.McpHub`) is made with the tree and shared (`ServiceContext.resources.mcp`)
so agents and `tree.tool_registry()` reach the same connections; it restarts servers
itself (with backoff, up to `hub.MAX_FAILURES`), so their children are temporary.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.mcp.protocol import McpRequest, McpServerInfo, McpServerList
from phloem.actors.services import Call, ServiceActor, ServiceContext, register_service
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision.spec import ChildSpec, SupervisorChild, SupervisorSpec
from phloem.supervision.supervisor import SupervisorRef, sibling_of

SERVICE_NAME = "mcp"
SERVERS_ID = "servers"
SERVICE_ID = "service"
SERVICE = f"{SERVICE_NAME}/{SERVICE_ID}"


class McpService(ServiceActor):
    """Answers `ListMcpServers`; closes the hub when the tree stops."""

    request_type = McpRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        from phloem.actors.mcp.hub import McpHub

        hub = ctx.resources.mcp
        if not isinstance(hub, McpHub):
            raise PhloemError(ErrorKind.START_FAILED, "the MCP hub is missing")
        self.hub = hub
        hub.attach(self._servers_supervisor)

    def _servers_supervisor(self) -> SupervisorRef | None:
        handle = self._phloem_handle
        found = sibling_of(handle, SERVERS_ID) if handle is not None else None
        return found if isinstance(found, SupervisorRef) else None

    def handle(self, message: Any, call: Call) -> Any:
        if message.connect:
            self.hub.connect()
        servers = [msgspec.convert(info, McpServerInfo) for info in self.hub.info()]
        return McpServerList(servers, list(self.hub.warnings.drain()))

    def on_stop(self) -> None:
        self.hub.close()  # sessions end, stdio children stop; a later need reconnects
        super().on_stop()


def mcp_factory(ctx: ServiceContext) -> ChildSpec | None:
    """The `mcp` subtree (see the module docstring); None without configured servers."""
    if not ctx.config.mcp.servers and not ctx.config.mcp.allow_foreign:
        return None
    from phloem.actors.mcp.hub import McpHub  # the SDK loads only when MCP is configured

    if ctx.resources.mcp is None:
        ctx.resources.mcp = McpHub(ctx.config.mcp)
    return ChildSpec(
        SERVICE_NAME,
        SupervisorChild(
            SupervisorSpec(strategy="one_for_one", intensity=3),
            [
                ChildSpec(SERVERS_ID, SupervisorChild(SupervisorSpec(intensity=0))),
                ChildSpec(SERVICE_ID, (McpService, (ctx,), {}), shutdown=15.0),
            ],
        ),
    )


register_service(SERVICE_NAME, mcp_factory)
