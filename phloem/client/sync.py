"""`phloem.Client`: talk to a phloem daemon over its Unix socket, or to an embedded tree.

    with phloem.Client.connect() as client:        # default socket path from the config
        client.ask("echo", {"hello": 1})            # -> {"hello": 1}
        client.status().uptime_s
        for event in client.subscribe("echo/x", CreditWindow(16, 1 << 20)): ...

`tree.client()` returns the same class over an in-process transport. Each client is its
own owner: refs and streams it opens are cancelled when it closes or its connection
drops. Feature methods come from one mixin module per feature in this package.
"""

from __future__ import annotations

import os

from phloem.client.agents import AgentClientMethods
from phloem.client.base import ClientBase, resolve_socket_path
from phloem.client.cluster import ClusterMethods
from phloem.client.control import ControlMethods
from phloem.client.eval import EvalClientMethods
from phloem.client.live import LiveMethods
from phloem.client.mcp import McpClientMethods
from phloem.client.planning import PlanningMethods
from phloem.client.plugins import PluginMethods
from phloem.client.protocol import DEFAULT_CONNECT_TIMEOUT_S
from phloem.client.runs import RunsClientMethods
from phloem.client.sessions import SessionClientMethods
from phloem.client.socket import SocketTransport
from phloem.client.telemetry import TelemetryMethods


class Client(
    AgentClientMethods,
    ClusterMethods,
    ControlMethods,
    EvalClientMethods,
    LiveMethods,
    McpClientMethods,
    PlanningMethods,
    RunsClientMethods,
    SessionClientMethods,
    PluginMethods,
    TelemetryMethods,
    ClientBase,
):
    """The phloem client: `Client.connect(path)` for a daemon, `tree.client()` embedded.

    Feature methods (planning, agents, providers, ...) are mixins subclassing
    `ClientBase`; add yours to this class's bases.
    """

    @classmethod
    def connect(
        cls, path: str | os.PathLike[str] | None = None, timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    ) -> Client:
        """Connect to the daemon at `path` (default: `$PHLOEM_SOCKET`, else the default
        config's socket path)."""
        return cls(SocketTransport.connect(resolve_socket_path(path), timeout))

    def stop_daemon(self) -> None:
        """Ask the daemon to stop gracefully (it replies first, then stops)."""
        self._transport.request("stop", "", b"", None)

    def __enter__(self) -> Client:
        return self
