"""`phloem mcp serve --http` as a real subprocess, driven by the official SDK's
streamable-HTTP client: tools, agents, errors, a long call with progress; its sessions,
Host/Origin checks, body bound and lifecycle seen on the wire."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, MCPDeprecationWarning
from mcp.client.streamable_http import streamable_http_client

from phloem.actors.mcp.lines import MAX_MESSAGE_BYTES
from phloem.actors.mcp.serve import PROGRESS_INTERVAL_S
from phloem.actors.mcp.serve_http import LoopbackOnly, parse_listen, security_for
from tests.helpers import PY, ROOT, run_cli, wait_until

pytestmark = pytest.mark.timeout(120)

START_S = 60.0
"""How long the server may take to say its URL (a loaded machine starts Python slowly)."""
SLOW_S = 3.0
"""How long the slow agent sleeps: several progress intervals."""
CONFIG = """
[agents.functions.greeter]
fn = "tests.actors.mcp.agents:greet"
description = "Greets someone"
input_keys = ["name"]
output_key = "greeting"

[agents.functions.sleeper]
fn = "tests.actors.mcp.agents:slow"
description = "Sleeps"
input_keys = ["seconds"]
output_key = "slept"
"""
WIRE = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


@contextmanager
def served(tmp_path: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """(its URL, the process) of `phloem mcp serve --http 127.0.0.1:0` over a workspace."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nneedle here\nomega\n")
    (tmp_path / "secret.txt").write_text("outside")
    proc = subprocess.Popen(
        [PY, "-m", "phloem", "mcp", "serve", "--root", str(root), "--tools", "read,grep",
         "--http", "127.0.0.1:0", *extra],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    said: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        url = ""
        while not url:
            found = re.search(r"listening on (\S+)", said.get(timeout=START_S))
            url = found.group(1) if found else ""
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def agents_config(tmp_path: Path) -> tuple[str, ...]:
    config = tmp_path / "phloem.toml"
    config.write_text(CONFIG)
    return ("--agents", "greeter,sleeper", "--config", str(config))


def test_an_sdk_client_uses_tools_and_agents_over_streamable_http(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def session(url: str) -> None:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            seen["init"] = await s.initialize()
            seen["tools"] = {t.name: t for t in (await s.list_tools()).tools}
            seen["grep"] = await s.call_tool("grep", {"pattern": "needle"})
            seen["escape"] = await s.call_tool("read", {"path": "../secret.txt"})
            seen["bad_args"] = await s.call_tool("read", {"path": 3})
            seen["unknown"] = await s.call_tool("bash", {"command": "true"})
            seen["agent"] = await s.call_tool("agent_greeter", {"state": {"name": "Ada"}})
            seen["slow"] = await s.call_tool(
                "agent_sleeper", {"state": {"seconds": SLOW_S}}, progress_callback=on_progress
            )
            seen["ping"] = await s.send_ping()
            with warnings.catch_warnings():  # the 2026-07-28 revision deprecates logging
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                seen["level"] = await s.set_logging_level("debug")

    with served(tmp_path, *agents_config(tmp_path)) as (url, proc):
        assert url.endswith("/mcp")
        anyio.run(session, url)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0  # a clean stop: the embedded tree was stopped
    assert seen["init"].server_info.name == "phloem"
    assert seen["init"].capabilities.logging is not None  # logging/setLevel is served
    assert seen["level"] is not None and seen["ping"] is not None
    tools = seen["tools"]
    assert {"read", "grep", "agent_greeter", "agent_sleeper"} == set(tools)
    assert tools["read"].annotations.read_only_hint is True
    assert tools["read"].input_schema["additionalProperties"] is False
    grep = seen["grep"]
    assert not grep.is_error and "notes.txt" in json.dumps(grep.structured_content)
    for name, kind in (("escape", "outside_root"), ("bad_args", "arguments"),
                       ("unknown", "unknown_tool")):  # fmt: skip
        result = seen[name]
        assert result.is_error and result.structured_content is None, name
        assert json.loads(result.content[0].text)["error"] == kind, name
    agent = seen["agent"]
    assert not agent.is_error and agent.structured_content["ok"] is True
    assert agent.structured_content["status"].startswith("done")
    slow = seen["slow"]
    assert not slow.is_error and slow.structured_content["ok"] is True
    print(f"\nprogress of a {SLOW_S} s call (every {PROGRESS_INTERVAL_S} s): {progress}")
    assert progress, "no progress notification during a long call"
    values = [done for done, _, _ in progress]
    assert values == sorted(values) and all(0 < v <= SLOW_S + 60 for v in values)
    assert all(message and "agent_sleeper running" in message for _, _, message in progress)


def _post(url: str, body: Any, **headers: str) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url, content=data, headers={**WIRE, **headers}, timeout=30)


def test_foreign_host_and_origin_are_refused_and_sessions_are_kept(tmp_path: Path) -> None:
    with served(tmp_path) as (url, _):
        port = url.split(":")[2].split("/")[0]
        # DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own Host
        foreign = _post(url, INITIALIZE, host=f"evil.example:{port}")
        assert foreign.status_code == 421, foreign.text
        cross = _post(url, INITIALIZE, origin="http://evil.example")
        assert cross.status_code == 403, cross.text
        assert _post(url, INITIALIZE, host=f"localhost:{port}").status_code == 200
        assert _post(url, INITIALIZE, origin=f"http://127.0.0.1:{port}").status_code == 200
        # the lifecycle: nothing but initialize opens a session
        early = _post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert early.status_code == 400 and "session" in early.text.lower()
        opened = _post(url, INITIALIZE)
        assert opened.status_code == 200 and '"serverInfo"' in opened.text
        session = opened.headers["mcp-session-id"]
        version = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        listed = _post(url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, **version)
        assert listed.status_code == 200 and '"grep"' in listed.text
        assert listed.headers["content-type"].startswith("text/event-stream")
        assert "id: " in listed.text  # numbered events: a broken stream can be resumed
        unknown = _post(url, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
                        **{**version, "mcp-session-id": "0" * 32})  # fmt: skip
        assert unknown.status_code == 404


def test_a_request_body_is_bounded_at_max_message_bytes(tmp_path: Path) -> None:
    def ping(size: int) -> bytes:
        """A `ping` of exactly `size` bytes (padded in its `_meta`)."""
        empty = b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"pad":""}}}'
        return empty.replace(b'"pad":""', b'"pad":"' + b"x" * (size - len(empty)) + b'"')

    with served(tmp_path) as (url, _):
        opened = _post(url, INITIALIZE)
        version = {"mcp-session-id": opened.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-11-25"}  # fmt: skip
        at = _post(url, ping(MAX_MESSAGE_BYTES), **version)
        assert at.status_code == 200 and '"result":{}' in at.text, at.text[:200]
        over = _post(url, ping(MAX_MESSAGE_BYTES + 1), **version)
        assert over.status_code == 413


def test_http_listen_addresses_are_loopback_only() -> None:
    assert parse_listen("127.0.0.1:8123") == ("127.0.0.1", 8123)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen("localhost:65535") == ("localhost", 65535)
    for bad in ("127.0.0.1", "127.0.0.1:65536", "127.0.0.1:x"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_listen(bad)
    for remote in ("0.0.0.0:80", "192.168.1.2:80", "example.com:80"):
        with pytest.raises(LoopbackOnly):
            parse_listen(remote)
    allowed = security_for("127.0.0.1", 8123)
    assert "127.0.0.1:8123" in allowed.allowed_hosts and "localhost:8123" in allowed.allowed_hosts
    assert "http://localhost:8123" in allowed.allowed_origins
    refused = run_cli("mcp", "serve", "--root", str(ROOT), "--http", "0.0.0.0:8000")
    assert refused.returncode == 2 and "loopback" in refused.stderr


def test_sessions_are_bounded_at_max_sessions(tmp_path: Path) -> None:
    from phloem.actors.mcp.serve_http import MAX_SESSIONS

    with served(tmp_path) as (url, _):
        opened = [_post(url, INITIALIZE) for _ in range(MAX_SESSIONS)]
        assert [r.status_code for r in opened] == [200] * MAX_SESSIONS  # exactly at the bound
        assert _post(url, INITIALIZE).status_code == 503  # one over
        ended = httpx.delete(
            url,
            headers={
                "mcp-session-id": opened[0].headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            },
            timeout=30,
        )
        assert ended.status_code in (200, 204)
        wait_until(lambda: _post(url, INITIALIZE).status_code == 200, timeout=30,
                   what="an ended session frees its place")  # fmt: skip
