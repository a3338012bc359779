"""docs/coding-tools.md: its examples run as printed."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/coding-tools.md"


def test_running_the_tools() -> None:
    (block,) = doc_python_blocks(GUIDE, "Running the tools")
    run_doc_block(block, f"{GUIDE}#running-the-tools")
