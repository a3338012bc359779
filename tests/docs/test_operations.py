"""docs/operations.md: its examples run as printed, and it covers the service and the
container it describes."""

from __future__ import annotations

import re

import pytest

from phloem.base import logs
from tests.docs.shell import ShellSession
from tests.helpers import doc_blocks, doc_python_blocks, doc_section, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/operations.md"


def test_reloading(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Reloading (SIGHUP)")
    run_doc_block(block, f"{GUIDE}#reloading-sighup")
    assert capsys.readouterr().out == "['agents'] ['daemon.max_connections']\n['helper']\n"


def test_logging(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Logging")
    logs.use_stdlib()  # what an embedded tree gets in a program that configured nothing
    try:
        run_doc_block(block, f"{GUIDE}#logging")
    finally:
        logs.configure_logging("warning", "console")  # what tests/conftest.py sets
    assert capsys.readouterr().out.startswith("tree_started services=['echo', 'agents'")


def test_the_service_and_container_sections_cover_their_recipes() -> None:
    service = doc_section(GUIDE, "As a service (systemd)")
    for needle in ("deploy/phloem.service", "systemctl reload phloem", "Type=notify"):
        assert needle in service, needle
    container = doc_section(GUIDE, "In a container")
    for needle in ("deploy/Containerfile", "podman build -f deploy/Containerfile"):
        assert needle in container, needle


@pytest.mark.timeout(300)
def test_operating_runs_as_written() -> None:
    (block,) = doc_blocks(GUIDE, "Operating", "sh")
    with ShellSession() as shell:
        done = shell.run(block)
    assert done["phloem stop echo"].stdout == "echo: stopped\n"
    assert "stopped    echo (by hand)" in done["phloem status"].stdout
    assert "echo  actor  stopped" in done["phloem tree"].stdout
    assert done["phloem start echo"].stdout == "echo: started\n"
    assert done["phloem restart planning/service"].stdout == "planning/service: restarted\n"
    assert done["phloem stop"].stdout.startswith("phloem daemon (pid ")


def test_the_operating_table_names_only_commands_phloem_has() -> None:
    from phloem.cli.main import FEATURE_CLI_MODULES

    commands = {name for names in FEATURE_CLI_MODULES.values() for name in names}
    table = [x for x in doc_section(GUIDE, "Operating").splitlines() if x.startswith("| `")]
    named = {word for row in table for word in re.findall(r"`phloem ([a-z]+)", row.split("|")[2])}
    assert named and named <= commands, named - commands
