"""docs/sessions.md: its examples run as printed (against a local stand-in model)."""

from __future__ import annotations

import pytest

from tests.docs.shell import ShellSession
from tests.helpers import doc_blocks, doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/sessions.md"


def test_sessions_from_python(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Sessions from Python")
    run_doc_block(block, f"{GUIDE}#sessions-from-python")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "['ls']"
    assert out[1].startswith("You have asked me 2 questions in this session; the first was")
    assert out[2] == "done [] 6"


@pytest.mark.timeout(300)
def test_chat_demo_runs_as_written() -> None:
    _, demo = doc_blocks(GUIDE, "Chatting from the shell", "sh")
    with ShellSession() as shell:
        done = shell.run(demo)
    (out,) = done.values()
    assert '> ls {"path":"."}' in out.stdout and "< ls ok" in out.stdout
    assert "The workspace holds: " in out.stdout
