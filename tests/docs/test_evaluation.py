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
