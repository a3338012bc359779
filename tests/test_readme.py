"""The README: short, with the two commands near the top and the four ways to use phloem;
its quickstart runs as written and its Python examples run as printed (against a real
daemon, found through `PHLOEM_SOCKET`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.docs.shell import ShellSession
from tests.helpers import (
    ROOT,
    DaemonProc,
    doc_blocks,
    doc_python_blocks,
    run_doc_block,
    running_daemon,
)

pytestmark = pytest.mark.timeout(60)

README = "README.md"
MAX_LINES = 200
"""The README stays a front page; the manual is docs/."""


@pytest.fixture(scope="module")
def readme_daemon() -> Iterator[DaemonProc]:
    with running_daemon("", "phloem/phloem.sock") as daemon:
        yield daemon


def test_the_readme_is_short_with_the_two_commands_and_four_ways_near_the_top() -> None:
    text = (ROOT / README).read_text(encoding="utf-8")
    assert text.startswith("# phloem\n")
    assert len(text.splitlines()) <= MAX_LINES
    top = "\n".join(text.splitlines()[:20])
    assert "make run" in top and "make test" in top
    for way in ("**1. The daemon.**", "**2. `phloem.Client`", "**3. Embedded", "**4. Live"):
        assert way in text


@pytest.mark.timeout(180)
def test_the_quickstart_runs_as_written() -> None:
    (block,) = doc_blocks(README, "Quickstart", "sh")
    with ShellSession() as shell:
        done = shell.run(block)
    status = done["phloem status"].stdout
    assert " · running · up " in status
    default_socket = f"{shell.env['XDG_RUNTIME_DIR']}/phloem/phloem.sock"
    assert f"socket     {default_socket}\n" in status  # found without --socket or a config
    assert done['phloem send echo \'{"hello": "phloem"}\''].stdout == '{"hello":"phloem"}\n'


def test_every_python_example_runs(
    readme_daemon: DaemonProc,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PHLOEM_SOCKET", str(readme_daemon.socket))
    client, tree = doc_python_blocks(README, "Four ways to use it")
    run_doc_block(client, f"{README}#client")
    assert capsys.readouterr().out == "{'hello': 'phloem'}\nunknown_actor\n"
    run_doc_block(tree, f"{README}#tree")
    assert capsys.readouterr().out == "[1, 2, 3]\necho\n"
