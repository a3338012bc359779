"""docs/agents.md: its examples run as printed."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/agents.md"


def test_a_planner_agent_in_code(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "A planner agent in code")
    run_doc_block(block, f"{GUIDE}#a-planner-agent-in-code")
    out = capsys.readouterr().out
    assert (
        "[['fetchFilings', 'fetchNews'], ['analyzeFinancials'], ['assessRisk'], ['writeBrief']]"
        in out
    )
    assert "done 5" in out
    assert "Risk level: HIGH (score 100/100)" in out


def test_interceptors(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(
        GUIDE, "Interceptors: the one seam around agent, model and tool calls"
    )
    assert "class NoBash(Interceptor)" in block
    run_doc_block(block, f"{GUIDE}#interceptors")
    assert "denied - bash is not allowed here\n" in capsys.readouterr().out
