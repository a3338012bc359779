"""docs/live.md: its examples run as printed (against the fake Live server)."""

from __future__ import annotations

import pytest

from tests.docs.shell import ShellSession
from tests.helpers import doc_blocks, doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/live.md"


def test_a_session(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "A session")
    run_doc_block(block, f"{GUIDE}#a-session")
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "1 ready {'resumed': False, 'reconnects': 0}",
        "2 text {'text': 'echo: hello'}",
        "3 turn_complete {'reason': None}",
        "active",
        "4 closed {'reason': 'client_closed', 'detail': ''}",
    ]


@pytest.mark.timeout(300)
def test_live_chat_demo_runs_as_written() -> None:
    *_, demo = doc_blocks(GUIDE, "A session", "sh")
    with ShellSession() as shell:
        done = shell.run(demo)
    (out,) = done.values()
    assert out.stdout.splitlines() == ["echo: hello", "echo: and again"]
