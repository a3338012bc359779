"""MCP stdio servers' memory cap, with a real MCPServer server child (`servers.py`)."""

from __future__ import annotations

import msgspec
import pytest

from phloem.actors.mcp.hub import McpHub
from phloem.actors.mcp.settings import (
    DEFAULT_MAX_MEMORY_BYTES,
    MEMORY_BYTES_RANGE,
    McpConfig,
    McpServerConfig,
)
from phloem.config import Config
from phloem.tools.contract import ToolContext
from phloem.tree import Tree
from tests.actors.mcp.test_mcp_client import SERVER, stdio
from tests.helpers import pids_alive, tree_node, wait_until

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024


def test_a_stdio_server_over_its_memory_cap_is_killed_reported_and_reconnected() -> None:
    cap = 256 * MIB
    server = msgspec.structs.replace(stdio(), max_memory_bytes=cap)
    tree = Tree.start(Config(mcp=McpConfig(servers={"m": server})))
    try:
        hub = tree.resources.mcp
        assert isinstance(hub, McpHub)
        tools = {t.name: t for t in hub.tools(["m"])}
        bridge = tree_node(tree.snapshot(), "phloem/mcp/servers/m")
        assert bridge.rss_cap_bytes == cap  # the cap is the child's, shown in the tree
        (program,) = bridge.children
        hog = tools["mcp__m__hog"].run({"mib": 2048}, ToolContext())  # type: ignore[attr-defined]
        assert hog["error"] == "server_failed" and hog["memory_exceeded"] is True
        assert f"max_memory_bytes = {cap}" in hog["message"] and "rss " in hog["message"]
        print(f"\nMCP server killed over its cap: {hog['message']}")
        wait_until(
            lambda: not pids_alive(program.pid), timeout=30, what="the server program gone"
        )  # killed, then reaped
        codes = [w.code for w in hub.warnings.drain()]
        assert "mcp_server_memory_exceeded" in codes
        srv = hub.server("m")
        wait_until(lambda: srv.restarts == 1 and srv.state == "connected", timeout=60)
        echo = tools["mcp__m__echo"].run({"text": "back"}, ToolContext())  # type: ignore[attr-defined]
        assert echo["content"] == "back"
    finally:
        tree.stop()


@pytest.mark.parametrize(
    ("edge", "over"),
    [
        (MEMORY_BYTES_RANGE[0], MEMORY_BYTES_RANGE[0] - 1),
        (MEMORY_BYTES_RANGE[1], MEMORY_BYTES_RANGE[1] + 1),
    ],
)
def test_max_memory_bytes_accepts_its_edges_and_refuses_one_past(edge: int, over: int) -> None:
    base = {"command": [*SERVER, "stdio"]}
    kept = msgspec.convert({**base, "max_memory_bytes": edge}, McpServerConfig)
    assert kept.max_memory_bytes == edge
    with pytest.raises(msgspec.ValidationError, match="max_memory_bytes"):
        msgspec.convert({**base, "max_memory_bytes": over}, McpServerConfig)
    assert msgspec.convert(base, McpServerConfig).max_memory_bytes == DEFAULT_MAX_MEMORY_BYTES
