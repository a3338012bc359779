"""docs/operations.md: its examples run as printed, and it covers the service and the
container it describes."""

from __future__ import annotations

import pytest

from phloem.base import logs
from tests.helpers import doc_python_blocks, doc_section, run_doc_block

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
