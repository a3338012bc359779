"""docs/supervision.md: its examples run as printed."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/supervision.md"


def test_supervisors_actors_and_monitors(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Supervisors, actors and monitors")
    run_doc_block(block, f"{GUIDE}#supervisors-actors-and-monitors")
    assert capsys.readouterr().out == "running\n"


def test_process_children() -> None:
    (block,) = doc_python_blocks(GUIDE, "Process children")
    run_doc_block(block, f"{GUIDE}#process-children")


def test_every_process_child_in_the_tree(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Every process child in the tree")
    run_doc_block(block, f"{GUIDE}#every-process-child-in-the-tree")
    assert capsys.readouterr().out == "phloem: worker helper\n"


def test_timers(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Timers")
    run_doc_block(block, f"{GUIDE}#timers")
    assert capsys.readouterr().out == "True False\n"
