"""MCP and LSP: a tool call through phloem vs the SDK's own client; write + diagnostics.

- `mcp_call_phloem`: one `mcp__b__echo` call through the one tool contract (an MCPServer
  stdio server behind phloem's supervised bridge child, the hub's event loop thread, a
  caller on another thread), floor `mcp_call_sdk`: the same call from the SDK's own
  `stdio_client` + `ClientSession`, measured inside its event loop.
- `write_with_diagnostics`: a `write` of a small Python file decorated with `ruff
  server`'s diagnostics of that version, floor `write_plain`: the same write without a
  language server.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from phloem.actors.lsp.hub import LspHub
from phloem.actors.lsp.settings import LspConfig, LspServerConfig
from phloem.actors.mcp.hub import McpHub
from phloem.actors.mcp.settings import McpConfig, McpServerConfig
from phloem.tools.contract import ToolContext
from phloem.tools.registry import ToolRegistry, coding_tools
from phloem.tools.workspace import Workspace
from tests.helpers import ROOT
from tests.perf.common import median_seconds, row

CALLS = 300
WRITES = 40
SERVER = [sys.executable, "-m", "tests.actors.mcp.servers", "stdio"]


def _sdk_call_seconds() -> float:
    params = StdioServerParameters(
        command=SERVER[0], args=SERVER[1:], cwd=str(ROOT), env=dict(os.environ)
    )
    samples: list[float] = []

    async def main() -> None:
        with open("/dev/null", "w") as quiet:
            async with (
                stdio_client(params, errlog=quiet) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for i in range(CALLS + 20):
                    t0 = time.perf_counter()
                    await session.call_tool("echo", {"text": "ping"})
                    if i >= 20:
                        samples.append(time.perf_counter() - t0)

    anyio.run(main)
    samples.sort()
    return samples[len(samples) // 2]


def _phloem_call_seconds() -> float:
    hub = McpHub(McpConfig(servers={"b": McpServerConfig(command=SERVER, cwd=str(ROOT))}))
    try:
        echo = {t.name: t for t in hub.tools(["b"])}["mcp__b__echo"]
        ctx = ToolContext()
        return median_seconds(lambda: echo.run({"text": "ping"}, ctx), CALLS)
    finally:
        hub.close()


def _write_seconds(with_lsp: bool) -> float:
    root = Path(tempfile.mkdtemp())
    ruff = str(Path(sys.executable).parent / "ruff")
    server = LspServerConfig(command=[ruff, "server"], patterns=["*.py"], language_id="python")
    hub = LspHub(LspConfig(servers={"ruff": server}))
    try:
        tools = ToolRegistry(
            (hub.decorate(t) if with_lsp else t) for t in coding_tools() if t.name == "write"
        )
        ctx = ToolContext(workspace=Workspace(root))
        counter = iter(range(1_000_000))

        def write() -> Any:
            n = next(counter)
            content = f"import os\n\nVALUE = {n}\n" if n % 2 else f"VALUE = {n}\n"
            result = tools.run("write", {"path": "mod.py", "content": content}, ctx)
            if with_lsp and "diagnostics" not in result:
                raise RuntimeError("no diagnostics within the settle time")
            return result

        return median_seconds(write, WRITES, warmup=4)
    finally:
        hub.close()


def run() -> list[dict[str, Any]]:
    sdk = _sdk_call_seconds()
    phloem = _phloem_call_seconds()
    plain = _write_seconds(False)
    diagnosed = _write_seconds(True)
    return [
        row("mcp_call_phloem", phloem * 1e6, "us", "mcp_call_sdk", sdk * 1e6, None),
        row("write_with_diagnostics", diagnosed * 1e3, "ms", "write_plain", plain * 1e3, None),
    ]
