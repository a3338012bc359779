"""The `lsp` service: the tree's LSP hub and the supervisor of its language servers.

    lsp                 supervisor (one_for_one), when `[lsp] mode = "auto"` has servers
    ├── servers         supervisor: one temporary process child per running server
    └── service         answers `ListLspServers`

The hub (`hub.LspHub`) is shared (`ServiceContext.resources.lsp`): the tree's `write`
and `edit` tools (`tree.tool_registry()`) report through it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.lsp.hub import LspHub
from phloem.actors.services import Call, ServiceActor, ServiceContext, register_service
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.warnings import RunWarning
from phloem.supervision.spec import ChildSpec, SupervisorChild, SupervisorSpec
from phloem.supervision.supervisor import SupervisorRef, sibling_of

SERVICE_NAME = "lsp"
SERVERS_ID = "servers"


class ListLspServers(msgspec.Struct, frozen=True, tag="list"):
    pass


class LspServerInfo(msgspec.Struct, frozen=True):
    root: str
    server: str
    state: str  # running | idle | stopped | disabled
    failures: int
    pid: int | None
    error: str = ""  # why it last failed (e.g. killed over its memory cap)


class LspServerList(msgspec.Struct, frozen=True):
    servers: list[LspServerInfo]
    warnings: list[RunWarning] = []


class LspService(ServiceActor):
    request_type = ListLspServers

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        hub = ctx.resources.lsp
        if not isinstance(hub, LspHub):
            raise PhloemError(ErrorKind.START_FAILED, "the LSP hub is missing")
        self.hub: LspHub = hub
        hub.attach(self._servers_supervisor)

    def _servers_supervisor(self) -> SupervisorRef | None:
        handle = self._phloem_handle
        found = sibling_of(handle, SERVERS_ID) if handle is not None else None
        return found if isinstance(found, SupervisorRef) else None

    def handle(self, message: Any, call: Call) -> Any:
        servers = [msgspec.convert(info, LspServerInfo) for info in self.hub.info()]
        return LspServerList(servers, list(self.hub.warnings.drain()))

    def on_stop(self) -> None:
        self.hub.close()
        super().on_stop()


def lsp_factory(ctx: ServiceContext) -> ChildSpec | None:
    """The `lsp` subtree; None when `mode = "off"` or no server is configured."""
    cfg = ctx.config.lsp
    if cfg.mode == "off" or not cfg.servers:
        return None
    if ctx.resources.lsp is None:
        ctx.resources.lsp = LspHub(cfg)
    return ChildSpec(
        SERVICE_NAME,
        SupervisorChild(
            SupervisorSpec(strategy="one_for_one", intensity=3),
            [
                ChildSpec(SERVERS_ID, SupervisorChild(SupervisorSpec(intensity=0))),
                ChildSpec("service", (LspService, (ctx,), {}), shutdown=15.0),
            ],
        ),
    )


register_service(SERVICE_NAME, lsp_factory)
