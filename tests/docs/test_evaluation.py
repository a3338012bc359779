"""docs/evaluation.md: its examples run as printed."""

from __future__ import annotations

import re

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/evaluation.md"


def test_running_an_eval(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Running an eval")
    run_doc_block(block, f"{GUIDE}#running-an-eval")
    out = capsys.readouterr().out
    assert "passed 1.0 {'answer': 1.0, 'response_match_score': 1.0, 'tools': 1.0}" in out
    assert "4/4" in out and "True []" in out
    assert "# Evaluation report" in out
    assert re.search(r"^s-[0-9a-f]{16}$", out, re.M)


def test_without_a_daemon() -> None:
    from tests.docs.shell import ShellSession
    from tests.helpers import doc_blocks

    (block,) = doc_blocks(GUIDE, "Without a daemon", "sh")
    with ShellSession() as shell:
        [done] = shell.run(block).values()
    assert done.stderr.splitlines()[0] == (
        "eval helpdesk: 2 cases, agent helpdesk, embedded tree from conf/phloem.toml"
    )
    assert "| weather-oslo | passed |" in done.stdout and "off-topic" not in done.stdout


def test_why_a_case_failed(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Why a case failed")
    run_doc_block(block, f"{GUIDE}#why-a-case-failed")
    out = capsys.readouterr().out
    for line in block.split("diagnosis_lines(case)))\n", 1)[1].splitlines():
        assert line.removeprefix("# ") in out  # the printed lines, as the guide shows them
    assert "failed ['unit']" in out
