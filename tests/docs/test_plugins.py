"""docs/plugins.md: its examples run as printed."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/plugins.md"


def test_hooks_and_their_answers(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Hooks and their answers")
    run_doc_block(block, f"{GUIDE}#hooks-and-their-answers")
    out = capsys.readouterr().out
    assert out == (
        "run helper done\nIt is fine. | Answer in one sentence.\nrun helper done\nfrom the cache\n"
    )
