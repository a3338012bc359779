"""docs/models.md: its examples run as printed."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/models.md"


def test_one_shot_runs_and_the_probe() -> None:
    (block,) = doc_python_blocks(GUIDE, "One-shot runs and the probe")
    run_doc_block(block, f"{GUIDE}#one-shot-runs-and-the-probe")
