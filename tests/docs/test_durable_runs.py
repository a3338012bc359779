"""docs/durable-runs.md: its example runs as printed."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(120)

GUIDE = "docs/durable-runs.md"


def test_making_a_run_durable(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Making a run durable")
    run_doc_block(block, f"{GUIDE}#making-a-run-durable")
    assert capsys.readouterr().out.split("\n")[:3] == ["drun_", "completed", "['done']"]
