"""An OAuth-protected streamable-HTTP MCP server (`oauth_server.py`, the SDK's auth
helpers): `phloem mcp login` runs the SDK's client flow, the daemon connects with the
stored tokens (mode 0600), refreshes an expired one — and no token ever reaches a log,
an error, a CLI output or telemetry (every token the server issues is a canary)."""

from __future__ import annotations

import json
import os
import queue
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from phloem.actors.mcp.hub import McpHub
from phloem.actors.mcp.oauth import MAX_TOKEN_FILE_BYTES, TokenFile
from phloem.actors.mcp.settings import McpConfig, McpServerConfig
from phloem.tools.contract import ToolContext
from tests.actors.mcp.loopback import free_port, serving
from tests.actors.mcp.oauth_server import CANARY
from tests.actors.telemetry.receiver import Receiver
from tests.helpers import PY, ROOT, run_cli, running_daemon, wait_until

pytestmark = pytest.mark.timeout(180)

SERVER = "tests.actors.mcp.oauth_server"
FLOW_S = 120.0
"""How long the login may take end to end (each step starts a Python process)."""


def _config(url: str, oauth_dir: Path, endpoint: str) -> str:
    return f"""
[logging]
level = "debug"
format = "json"

[telemetry]
enabled = true
endpoint = "{endpoint}"
flush_interval_s = 0.05

[mcp]
oauth_dir = "{oauth_dir}"

[mcp.servers.sec]
url = "{url}"
oauth = true
timeout_s = 30
connect_timeout_s = 60
"""


def _login(config: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """`phloem mcp login sec`, its URL opened by an HTTP client standing in for the browser
    of a person who approves; (the finished command, what the page said)."""
    proc = subprocess.Popen(
        [PY, "-m", "phloem", "mcp", "login", "sec", "--config", str(config), "--no-browser"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: queue.Queue[str] = queue.Queue()
    err_lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_lines.append(line)
            said.put(line)

    threading.Thread(target=read, daemon=True).start()
    url = ""
    while not url.startswith("http"):
        url = said.get(timeout=FLOW_S).strip()
    page = httpx.get(url, follow_redirects=True, timeout=FLOW_S)
    out, _ = proc.communicate(timeout=FLOW_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(err_lines)), (
        f"{page.status_code} {page.text}"
    )


def _server_info(socket: str) -> dict[str, Any]:
    shown = run_cli("mcp", "list", "--json", "--socket", socket, timeout=120)
    assert shown.returncode == 0, shown.stderr
    (server,) = json.loads(shown.stdout)["servers"]
    return dict(server)


def test_login_then_the_daemon_connects_and_no_token_shows_anywhere(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    oauth_dir = tmp_path / "oauth"
    outputs: list[str] = []
    with serving(SERVER, port), Receiver() as rx:
        config_text = _config(url, oauth_dir, rx.endpoint)
        with running_daemon(config_text) as daemon:
            socket = str(daemon.socket)
            before = _server_info(socket)  # no tokens yet: waits for a login, no failure
            outputs.append(json.dumps(before))
            assert before["state"] == "login_needed" and before["failures"] == 0
            assert "phloem mcp login sec" in before["error"]
            login, page = _login(daemon.config)
            outputs += [login.stdout, login.stderr, page]
            assert login.returncode == 0, login.stderr
            assert page.startswith("200 ") and "authorized" in page
            assert "sec: authorized; 1 tools" in login.stdout
            token_file = oauth_dir / "sec.json"
            assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(oauth_dir).st_mode) == 0o700
            stored = json.loads(token_file.read_text())
            access = stored["tokens"]["token"]["access_token"]
            assert access.startswith(CANARY)  # the canary was issued and is kept here only
            after = _server_info(socket)  # the next need of its tools connects it
            outputs.append(json.dumps(after))
            assert after["state"] == "connected", after
            assert [t["name"] for t in after["tools"]] == ["mcp__sec__add"]
            text = run_cli("mcp", "list", "--socket", socket, timeout=120)
            outputs += [text.stdout, text.stderr]
            assert "connected" in text.stdout
        wait_until(lambda: bool(rx.raw), timeout=30, what="telemetry arrives")
        telemetry = b"".join(rx.raw)
    logs = "".join(daemon.lines)
    assert "mcp_server_login_needed" in logs  # the log says what happened ...
    found = [
        where
        for where, text in [
            ("daemon log", logs),
            ("telemetry", telemetry.decode("latin-1")),
            *(("cli/error output", o) for o in outputs),
        ]
        if CANARY in text
    ]
    print(f"\ncanaries found outside the token file: {len(found)} {found}")
    assert found == []  # ... and no token ever shows


def test_an_expired_token_is_refreshed_and_written_back(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    cfg = McpServerConfig(url=url, oauth=True, timeout_s=30, connect_timeout_s=60)
    mcp = McpConfig(servers={"sec": cfg}, oauth_dir=str(tmp_path / "oauth"))
    config = tmp_path / "phloem.toml"
    config.write_text(f'[mcp]\noauth_dir = "{tmp_path / "oauth"}"\n'
                      f'[mcp.servers.sec]\nurl = "{url}"\noauth = true\n')  # fmt: skip
    with serving(SERVER, port, "--expires", "2"):
        login, _ = _login(config)
        assert login.returncode == 0, login.stderr
        path = mcp.oauth_path("sec")
        first = json.loads(path.read_text())["tokens"]
        wait_until(lambda: time.time() > first["expires_at"] + 0.5, timeout=30, what="expiry")
        hub = McpHub(mcp)
        try:
            tools = {t.name: t for t in hub.tools(["sec"])}
            result = tools["mcp__sec__add"].run({"a": 40, "b": 2}, ToolContext())
            assert result["content"] == "42", (result, hub.server("sec").last_error)
        finally:
            hub.close()
        second = json.loads(path.read_text())["tokens"]
        assert second["token"]["access_token"] != first["token"]["access_token"]
        assert second["expires_at"] > first["expires_at"]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_missing_refused_or_unreadable_login_is_told_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "oauth" / "sec.json"
    store = TokenFile(path)
    assert not store.has_tokens()
    path.parent.mkdir()
    path.write_bytes(b"{" * 10)  # not JSON: treated as no login, logged, never raised
    assert not store.has_tokens()
    path.write_bytes(b" " * (MAX_TOKEN_FILE_BYTES + 1))  # over the bound: not read
    assert not store.has_tokens()
    path.write_text(json.dumps({"tokens": {"token": {"access_token": "t"}}}).ljust(
        MAX_TOKEN_FILE_BYTES))  # fmt: skip
    assert store.has_tokens()  # exactly at the bound: read
    unknown = run_cli("mcp", "login", "nope", "--config", str(_write(tmp_path, "")))
    assert unknown.returncode == 2 and "oauth = true" in unknown.stderr
    closed = free_port()  # nothing listens: the flow fails in one line, exit 1
    cfg = _write(tmp_path, f'[mcp.servers.sec]\nurl = "http://127.0.0.1:{closed}/mcp"\n'
                           "oauth = true\nconnect_timeout_s = 10\n")  # fmt: skip
    failed = run_cli("mcp", "login", "sec", "--config", str(cfg), "--no-browser", timeout=60)
    assert failed.returncode != 0 and "login failed" in failed.stderr
    assert "Traceback" not in failed.stderr and len(failed.stderr.strip().splitlines()) == 1


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f'[mcp]\noauth_dir = "{tmp_path / "oauth2"}"\n' + text)
    return path
