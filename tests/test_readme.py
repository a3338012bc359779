"""Every Python example in the README runs as printed (one test per section).

The top sections' examples talk to a real daemon (`PHLOEM_SOCKET` points at it); the
others build what they need themselves.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

import msgspec
import pytest

from phloem.agents.settings import LlmAgentConfig
from phloem.config import Config, parse_config
from tests.helpers import (
    ROOT,
    DaemonProc,
    readme_python_blocks,
    readme_section,
    run_readme_block,
    running_daemon,
)

pytestmark = pytest.mark.timeout(60)


def _top() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Supervision", 1)[0]


@pytest.fixture(scope="module")
def readme_daemon() -> Iterator[DaemonProc]:
    with running_daemon("", "phloem/phloem.sock") as daemon:
        yield daemon


def test_the_top_has_the_two_commands_and_four_ways() -> None:
    top = _top()
    assert top.startswith("# phloem\n")
    assert "make run" in top and "make test" in top
    for way in ("**1. The daemon.**", "**2. `phloem.Client`", "**3. Embedded", "**4. Live"):
        assert way in top


def test_every_python_example_in_the_top_runs(
    readme_daemon: DaemonProc,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PHLOEM_SOCKET", str(readme_daemon.socket))
    blocks = re.findall(r"```python\n(.*?)```", _top(), re.S)
    assert len(blocks) == 4
    for i, block in enumerate(blocks):
        run_readme_block(block, f"python-{i}")
    out = capsys.readouterr().out
    assert "{'hello': 'phloem'}" in out
    assert "[0, 1, 2]" in out
    assert "[0, 1, 2] 100" in out  # AsyncClient: 100 pipelined asks
    assert "unknown_actor" in out
    assert "echo\n" in out
    assert "├── echo  actor  running" in out


def test_the_configuration_table_names_every_key_of_the_default_config() -> None:
    top = _top()
    data = tomllib.loads((ROOT / "conf" / "phloem.toml").read_text())
    for section in ("daemon", "supervision", "logging"):
        for key in data[section]:
            assert key in top, f"{section}.{key} is not documented in the README"
    assert isinstance(parse_config((ROOT / "conf" / "phloem.toml").read_text()), Config)


def test_supervision(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = readme_python_blocks("Supervision")
    run_readme_block(block, "supervision")
    assert capsys.readouterr().out == "running\n"


def test_process_children() -> None:
    block = readme_python_blocks("Process children")[0]
    run_readme_block(block, "process-children")


def test_model_providers() -> None:
    (block,) = readme_python_blocks("Model providers")
    run_readme_block(block, "model-providers")


def test_agents_and_planners(capsys: pytest.CaptureFixture[str]) -> None:
    block = readme_python_blocks("Agents and planners")[0]
    run_readme_block(block, "agents")
    out = capsys.readouterr().out
    assert (
        "[['fetchFilings', 'fetchNews'], ['analyzeFinancials'], ['assessRisk'], ['writeBrief']]"
        in out
    )
    assert "done 5" in out
    assert "Risk level: HIGH (score 100/100)" in out


def test_interceptors(capsys: pytest.CaptureFixture[str]) -> None:
    block = readme_python_blocks("Agents and planners")[-1]
    assert "class NoBash(Interceptor)" in block
    run_readme_block(block, "interceptors")
    assert "denied - bash is not allowed here\n" in capsys.readouterr().out


def test_planning_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    block = readme_python_blocks("Planning runtime")[0]
    run_readme_block(block, "planning")
    printed = capsys.readouterr().out
    assert "plan_accepted" in printed and "completed 4" in printed


def test_coding_tools() -> None:
    (block,) = readme_python_blocks("Coding tools")
    run_readme_block(block, "coding-tools")


def test_live_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = readme_python_blocks("Live sessions")
    run_readme_block(block, "live-sessions")
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "1 ready {'resumed': False, 'reconnects': 0}",
        "2 text {'text': 'echo: hello'}",
        "3 turn_complete {'reason': None}",
        "active",
        "4 closed {'reason': 'client_closed', 'detail': ''}",
    ]


def test_evaluation(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = readme_python_blocks("Evaluation")
    run_readme_block(block, "evaluation")
    out = capsys.readouterr().out
    assert "passed 1.0 {'answer': 1.0, 'response_match_score': 1.0, 'tools': 1.0}" in out
    assert "4/4" in out and "True []" in out
    assert "# Evaluation report" in out
    assert re.search(r"^s-[0-9a-f]{16}$", out, re.M)


@pytest.mark.timeout(120)
def test_mcp(capfd: pytest.CaptureFixture[str]) -> None:
    # capfd: the SDK's stdio client hands sys.stderr (a real file here) to its child
    client_side, serve_side = readme_python_blocks("MCP")
    run_readme_block(client_side, "mcp")
    printed = capfd.readouterr().out
    assert "42\n" in printed
    assert "calc stdio connected ['mcp__calc__add']" in printed
    run_readme_block(serve_side, "mcp-serve")
    printed = capfd.readouterr().out
    assert "['find', 'grep', 'ls', 'read']" in printed and "notes.txt" in printed


@pytest.mark.timeout(60)
def test_language_servers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import sys
    from pathlib import Path

    # `ruff` is a dev dependency: on PATH as it would be for a user
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (block,) = readme_python_blocks("Language servers")
    run_readme_block(block, "language-servers")
    printed = capsys.readouterr().out
    assert "app.py:1:8: warning F401 (Ruff): `os` imported but unused" in printed


def test_operating_the_daemon(capsys: pytest.CaptureFixture[str]) -> None:
    from phloem.base import logs

    blocks = readme_python_blocks("Operating the daemon")
    assert len(blocks) == 2
    run_readme_block(blocks[0], "operating-reload")
    assert capsys.readouterr().out == "['agents'] ['daemon.max_connections']\n['helper']\n"
    logs.use_stdlib()  # what an embedded tree gets in a program that configured nothing
    try:
        run_readme_block(blocks[1], "operating-logging")
    finally:
        logs.configure_logging("warning", "console")  # what tests/conftest.py sets
    assert capsys.readouterr().out.startswith("tree_started services=['echo', 'agents'")


def test_the_install_section_covers_clone_tool_service_and_container() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    install = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    for needle in (
        "make run",
        "make test",
        ". .venv/bin/activate",
        "pipx install .",
        "uv tool install .",
        "deploy/phloem.service",
        "deploy/Containerfile",
        "podman build -f deploy/Containerfile",
        "phloem completion bash",
    ):
        assert needle in install, needle


def test_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    block = readme_python_blocks("Plugins")[0]
    run_readme_block(block, "plugins")
    out = capsys.readouterr().out
    assert out == (
        "run helper done\nIt is fine. | Answer in one sentence.\nrun helper done\nfrom the cache\n"
    )


def test_telemetry(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.actors.telemetry.receiver import Receiver

    section = readme_section("Telemetry")
    assert "docker run" in section and "4318:4318" in section and "1.37.0" in section
    data = tomllib.loads((ROOT / "conf" / "phloem.toml").read_text())
    for key in data["telemetry"]:
        assert f"`telemetry.{key}`" in section or f"`{key}`" in section, key
    (block,) = readme_python_blocks("Telemetry")
    with Receiver() as rx:  # stands in for the Jaeger of the `docker run` line
        run_readme_block(block.replace("http://127.0.0.1:4318", rx.endpoint), "telemetry")
        assert capsys.readouterr().out == "done 3\n"
        spans = {s.name: s for s in rx.spans}
    assert set(spans) == {"my-request", "invoke_agent helper", "chat scripted"}
    assert spans["invoke_agent helper"].parent_span_id == spans["my-request"].span_id
    assert spans["chat scripted"].parent_span_id == spans["invoke_agent helper"].span_id
    assert spans["my-request"].resource["service.name"] == "readme"


def test_sessions_and_chat(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = readme_python_blocks("Sessions and chat")
    run_readme_block(block, "sessions")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "['ls']"
    assert out[1].startswith("You have asked me 2 questions in this session; the first was")
    assert out[2] == "done [] 6"


def test_web_view(
    readme_daemon: DaemonProc,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PHLOEM_SOCKET", str(readme_daemon.socket))
    (block,) = readme_python_blocks("Web view")
    run_readme_block(block, "web-view")
    assert capsys.readouterr().out == "True\n"
    section = readme_section("Web view")
    data = tomllib.loads((ROOT / "conf" / "phloem.toml").read_text())
    for key in data["web"]:
        assert f"`web.{key}`" in section, f"web.{key} is not documented in the README"


def test_instructions_skills_and_tool_policy(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = readme_python_blocks("Instructions, skills and tool policy")
    assert len(blocks) == 3
    run_readme_block("\n".join(blocks), "instructions")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "['~/.claude/CLAUDE.md', 'AGENTS.md']",
        "['~/.claude/CLAUDE.md', 'AGENTS.md', 'src/AGENTS.md']",
        "Tests: make test. Use type hints.",
        "['bash']",
        "['write', 'edit'] denied denied",
        "hi",
        "Be careful.",
        "['edit', 'find', 'grep', 'ls', 'read', 'write']",
        "Review a change",
        "Read the diff of HEAD~1 first. {'allow': ['grep', 'read'], 'deny': []}",
        "Fix issue-17 on branch main.",
    ]
    toml = re.findall(
        r"```toml\n(.*?)```", readme_section("Instructions, skills and tool policy"), re.S
    )
    llm = tomllib.loads(toml[0])["agents"]["llm"]["coder"]
    msgspec.convert(llm, LlmAgentConfig)  # every key is a real one
    harness = msgspec.convert(tomllib.loads(toml[1])["agents"]["llm"]["coder"], LlmAgentConfig)
    assert harness.confirmation is True and harness.spec("coder").templates is True
