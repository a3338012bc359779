"""docs/getting-started.md: its install section covers a clone and a tool, and its daemon
walkthrough runs as written, command by command."""

from __future__ import annotations

import pytest

from tests.docs.shell import ShellSession
from tests.helpers import doc_blocks, doc_section

GUIDE = "docs/getting-started.md"


def test_the_install_section_covers_a_clone_and_a_tool() -> None:
    install = doc_section(GUIDE, "Install")
    for needle in (
        "make run",
        "make test",
        ". .venv/bin/activate",
        "pipx install .",
        "uv tool install .",
        "phloem completion bash",
        "deploy/phloem.service",
        "deploy/Containerfile",
        "operations.md",
    ):
        assert needle in install, needle


@pytest.mark.timeout(120)
def test_a_config_of_your_own_runs_as_written() -> None:
    (block,) = doc_blocks(GUIDE, "A config of your own", "sh")
    with ShellSession() as shell:
        done = shell.run(block)
        written = shell.dir / "xdg_config_home" / "phloem" / "phloem.toml"
        assert done["phloem config init"].stdout.startswith(f"wrote {written}")
        listed = done["phloem model list"].stdout.splitlines()
        assert listed[0].startswith("flash ")
        assert listed[-1].startswith("from the daemon on ")


@pytest.mark.timeout(300)
def test_a_daemon_of_your_own_runs_as_written() -> None:
    (block,) = doc_blocks(GUIDE, "A daemon of your own", "sh")
    with ShellSession() as shell:
        done = shell.run(block)
    assert '"hello":"phloem"' in done['phloem send echo \'{"hello": "phloem"}\''].stdout
    brief = done[
        'phloem agent run supplierBrief --state company="ACME Components" --show brief'
    ].stdout
    assert "Risk level: HIGH" in brief
    plans = [out for line, out in done.items() if line.startswith("phloem plan run")]
    assert "status: completed" in plans[0].stdout
    assert "echo  actor  running" in done["phloem tree"].stdout


@pytest.mark.timeout(300)
def test_trying_chat_without_a_key_runs_as_written() -> None:
    (block,) = doc_blocks(GUIDE, "Trying chat without a key", "sh")
    with ShellSession() as shell:
        done = shell.run(block)
    asked = done['phloem chat --demo "what is in this directory?"'].stdout
    assert '> ls {"path":"."}' in asked and "The workspace holds: " in asked
    assert done["phloem live chat --demo --text hello"].stdout == "echo: hello\n"
    banner = done["phloem chat --demo"].stdout  # no terminal: the banner, then end of input
    assert "agent      demo (provider demo, model demo)" in banner
