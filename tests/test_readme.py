"""Every Python example in the README runs as printed (one test per section).

The top sections' examples talk to a real daemon (`PHLOEM_SOCKET` points at it); the
others build what they need themselves.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

import pytest

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
