"""docs/sessions.md: its examples run as printed (against a local stand-in model)."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/sessions.md"


def test_sessions_from_python(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Sessions from Python")
    run_doc_block(block, f"{GUIDE}#sessions-from-python")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "['ls']"
    assert out[1].startswith("You have asked me 2 questions in this session; the first was")
    assert out[2] == "done [] 6"
