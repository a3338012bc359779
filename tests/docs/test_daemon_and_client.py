"""docs/daemon-and-client.md: its examples run against a real daemon, as printed."""

from __future__ import annotations

import pytest

from tests.helpers import DaemonProc, doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/daemon-and-client.md"


def test_the_client(at_docs_daemon: DaemonProc, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "The client and the CLI over the socket")
    run_doc_block(block, f"{GUIDE}#the-client")
    out = capsys.readouterr().out
    assert "{'hello': 'phloem'}" in out
    assert "[0, 1, 2]" in out
    assert "unknown_actor" in out


def test_the_asyncio_client(at_docs_daemon: DaemonProc, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "The asyncio client")
    run_doc_block(block, f"{GUIDE}#the-asyncio-client")
    out = capsys.readouterr().out
    assert "[0, 1, 2] 100" in out  # 100 pipelined asks
    assert out.endswith("[0, 1, 2]\n")  # the stream under credit


def test_the_embedded_tree(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "The embedded tree")
    run_doc_block(block, f"{GUIDE}#the-embedded-tree")
    assert capsys.readouterr().out == "echo\n"


def test_live_status(at_docs_daemon: DaemonProc, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Live status")
    run_doc_block(block, f"{GUIDE}#live-status")
    assert "├── echo  actor  running" in capsys.readouterr().out


def test_runs(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Runs")
    run_doc_block(block, f"{GUIDE}#runs")
    assert capsys.readouterr().out.splitlines() == [
        "done hello Ada",
        "agent greeter done ['agent_event']",
        "['author', 'invocation', 'writes']",
    ]
