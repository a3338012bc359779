"""`phloem mcp list` against a daemon, and `phloem mcp serve` driven by the SDK's client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.helpers import PY, ROOT, run_cli, running_daemon

pytestmark = pytest.mark.timeout(90)

MCP_CONFIG = f"""
[mcp.servers.t]
command = [{json.dumps(sys.executable)}, "-m", "tests.actors.mcp.servers", "stdio"]
cwd = {json.dumps(str(ROOT))}
"""


def test_mcp_list_shows_servers_state_and_tools() -> None:
    with running_daemon(MCP_CONFIG) as daemon:
        sock = str(daemon.socket)
        idle = run_cli("mcp", "list", "--no-connect", "--socket", sock)
        assert idle.returncode == 0, idle.stderr
        assert "idle" in idle.stdout and "tools=0" in idle.stdout
        shown = run_cli("mcp", "list", "--socket", sock)
        assert shown.returncode == 0, shown.stderr
        assert "connected" in shown.stdout
        assert "mcp__t__add" in shown.stdout and "read-only" in shown.stdout
        assert "warning: mcp_name_collision" in shown.stdout
        as_json = run_cli("mcp", "list", "--json", "--socket", sock)
        listed = json.loads(as_json.stdout)
        server = listed["servers"][0]
        assert server["name"] == "t" and server["transport"] == "stdio"
        assert {"name": "mcp__t__add", "read_only": True}.items() <= next(
            t for t in server["tools"] if t["name"] == "mcp__t__add"
        ).items()


def test_mcp_list_without_servers() -> None:
    with running_daemon("") as daemon:
        shown = run_cli("mcp", "list", "--socket", str(daemon.socket))
    assert shown.returncode == 0, shown.stderr
    assert "(no MCP servers configured)" in shown.stdout


SERVE_CONFIG = """
[agents.functions.greeter]
fn = "tests.actors.mcp.agents:greet"
description = "Greets someone"
input_keys = ["name"]
output_key = "greeting"
"""


async def _serve_session(root: Path, config: Path, check: Any) -> None:
    params = StdioServerParameters(
        command=PY,
        args=["-m", "phloem", "mcp", "serve", "--root", str(root), "--tools", "read,grep",
              "--agents", "greeter", "--config", str(config)],
        cwd=str(ROOT),
        env=dict(os.environ),  # the SDK's default is minimal (no PYTHONDONTWRITEBYTECODE)
    )  # fmt: skip
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await check(session)


def test_mcp_serve_offers_tools_and_agents_to_an_sdk_client(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nneedle here\nomega\n")
    (tmp_path / "secret.txt").write_text("outside")
    config = tmp_path / "phloem.toml"
    config.write_text(SERVE_CONFIG)
    seen: dict[str, Any] = {}

    async def check(session: ClientSession) -> None:
        listed = await session.list_tools()
        seen["tools"] = {t.name: t for t in listed.tools}
        seen["read"] = await session.call_tool("read", {"path": "notes.txt"})
        seen["grep"] = await session.call_tool("grep", {"pattern": "needle"})
        seen["escape"] = await session.call_tool("read", {"path": "../secret.txt"})
        seen["agent"] = await session.call_tool("agent_greeter", {"state": {"name": "Ada"}})
        seen["unknown"] = await session.call_tool("bash", {"command": "true"})

    anyio.run(_serve_session, root, config, check)
    tools = seen["tools"]
    assert set(tools) == {"read", "grep", "agent_greeter"}
    assert tools["read"].annotations.read_only_hint is True
    assert tools["read"].input_schema["additionalProperties"] is False
    read = seen["read"]
    assert not read.is_error and "needle here" in read.structured_content["content"]
    grep = seen["grep"]
    assert not grep.is_error and "notes.txt" in json.dumps(grep.structured_content)
    escape = seen["escape"]
    assert escape.is_error
    assert json.loads(escape.content[0].text)["error"] == "outside_root"
    agent = seen["agent"]
    assert not agent.is_error, agent.content
    assert agent.structured_content["ok"] is True
    assert agent.structured_content["status"].startswith("done")
    unknown = seen["unknown"]
    assert unknown.is_error and json.loads(unknown.content[0].text)["error"] == "unknown_tool"


def test_mcp_serve_usage_errors(tmp_path: Path) -> None:
    bad_tool = run_cli("mcp", "serve", "--root", str(tmp_path), "--tools", "read,nope")
    assert bad_tool.returncode == 2 and "unknown tool 'nope' (known: read," in bad_tool.stderr
    no_config = run_cli("mcp", "serve", "--root", str(tmp_path), "--agents", "x")
    assert no_config.returncode == 2 and "--agents needs --config" in no_config.stderr
