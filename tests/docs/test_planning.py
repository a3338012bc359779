"""docs/planning.md: its examples run as printed."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/planning.md"


def test_running_a_plan(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Running a plan")
    run_doc_block(block, f"{GUIDE}#running-a-plan")
    printed = capsys.readouterr().out
    assert "plan_accepted" in printed and "completed 4" in printed
