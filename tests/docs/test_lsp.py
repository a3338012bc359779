"""docs/lsp.md: its examples run as printed (a real `ruff server`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/lsp.md"


def test_diagnostics_from_the_embedded_tree(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `ruff` is a dev dependency: on PATH as it would be for a user
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (block,) = doc_python_blocks(GUIDE, "Diagnostics from the embedded tree")
    run_doc_block(block, f"{GUIDE}#diagnostics-from-the-embedded-tree")
    printed = capsys.readouterr().out
    assert "app.py:1:8: warning F401 (Ruff): `os` imported but unused" in printed
