"""One runtime: one agent, declared once, gets one set of tools on every surface.

A real daemon with an MCP stdio server and the real `ruff server` configured runs the
harness agent `coder` (a local fake provider stands in for the model): one `phloem chat`
turn calls the MCP tool and writes a Python file, and gets the MCP result and the file's
diagnostics; `phloem agent run`, `phloem eval run` and `phloem mcp serve --agents` give the
same agent the same tools, and `mcp serve` answers with the agent's output.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from phloem.agents.settings import CODING_TOOLS
from tests.helpers import PY, ROOT, DaemonProc, cli_in as cli, running_daemon
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

pytestmark = pytest.mark.timeout(180)

RUFF = str(Path(sys.executable).parent / "ruff")


def config_text(fake: FakeProvider, tmp_path: Path, workdir: Path) -> str:
    server = json.dumps([PY, "-m", "tests.actors.mcp.servers", "stdio"])
    return f"""
[providers.fake]
protocol = "openai-chat"
model = "fake"
base_url = "{fake.base_url}/v1"
chat_token_limit = "max_tokens"
max_retries = 0

[sessions]
dir = "{tmp_path / "store"}"
fsync = false

[mcp.servers.t]
command = {server}
cwd = "{ROOT}"
connect_timeout_s = 60

[lsp.servers.ruff]
command = ["{RUFF}", "server"]
patterns = ["*.py"]
language_id = "python"

[agents.llm.coder]
provider = "fake"
harness = true
workdir = "{workdir}"
"""


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def daemon(fake: FakeProvider, tmp_path: Path, workdir: Path) -> Iterator[DaemonProc]:
    with running_daemon(config_text(fake, tmp_path, workdir)) as d:
        yield d


def declared(request: Any) -> set[str]:
    return {tool["function"]["name"] for tool in request.json.get("tools", [])}


def tool_answers(request: Any) -> dict[str, Any]:
    return {
        m["tool_call_id"]: json.loads(m["content"])
        for m in request.json["messages"]
        if m["role"] == "tool"
    }


def test_one_agent_gets_the_same_tools_everywhere(
    daemon: DaemonProc, fake: FakeProvider, workdir: Path, tmp_path: Path
) -> None:
    fake.add(
        chat_calls(
            chat_tool_call("mcp__t__add", json.dumps({"a": 20, "b": 22}), "c1"),
            chat_tool_call("write", json.dumps({"path": "bad.py", "content": "import os\n"}), "c2"),
        ),
        chat_text("Added and written."),
    )
    chat = cli(
        daemon, workdir, "chat", "--new", "add, then write bad.py", "--workdir", str(workdir)
    )
    assert chat.returncode == 0, chat.stderr
    assert "Added and written." in chat.stdout
    first, second = fake.requests[-2:]
    tools = declared(first)
    assert set(CODING_TOOLS) <= tools and {"mcp__t__add", "mcp__t__echo"} <= tools
    answers = tool_answers(second)
    assert answers["c1"]["content"] == "42"  # the MCP server's answer
    codes = {d["code"] for d in answers["c2"]["diagnostics"]}  # ruff's, on the written file
    assert "F401" in codes, answers["c2"]
    assert (workdir / "bad.py").read_text() == "import os\n"

    def asked_once(before: int) -> Any:
        assert len(fake.requests) == before + 1  # this surface called the model itself
        return fake.requests[-1]

    fake.add(chat_text("The agent's own answer."))
    before = len(fake.requests)
    run = cli(daemon, workdir, "agent", "run", "coder", "--input", "hello")
    assert run.returncode == 0, run.stderr
    assert "The agent's own answer." in run.stdout
    assert declared(asked_once(before)) == tools

    evalset = tmp_path / "set.evalset.json"
    evalset.write_text(
        json.dumps(
            {
                "schema_version": 2,
                "id": "one",
                "version": "1",
                "cases": [{"id": "c", "turns": [{"input": "hi", "expected_response": "x"}]}],
            }
        )
    )
    fake.add(chat_text("An eval answer."))
    before = len(fake.requests)
    evaluated = cli(daemon, workdir, "eval", "run", str(evalset), "--agent", "coder")
    assert "error" not in evaluated.stdout, evaluated.stdout + evaluated.stderr
    assert declared(asked_once(before)) == tools

    fake.add(chat_text("Served and answered."))
    before = len(fake.requests)
    result = serve_agent(workdir, daemon.config)
    assert not result.is_error, result.content
    assert result.structured_content["text"] == "Served and answered."  # its output
    assert declared(asked_once(before)) == tools


def serve_agent(root: Path, config: Path) -> Any:
    """`phloem mcp serve --agents coder` over stdio, called once by the MCP SDK client."""
    seen: dict[str, Any] = {}

    async def session() -> None:
        params = StdioServerParameters(
            command=PY,
            args=["-m", "phloem", "mcp", "serve", "--root", str(root),
                  "--agents", "coder", "--config", str(config)],
            cwd=str(ROOT),
            env=dict(os.environ),
        )  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            seen["result"] = await client.call_tool("agent_coder", {"input": "serve me"})

    anyio.run(session)
    return seen["result"]
