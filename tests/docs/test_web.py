"""docs/web.md: its example serves the page of a real daemon, and the guide documents every
`[web]` key of the example config."""

from __future__ import annotations

import tomllib

import pytest

from tests.helpers import ROOT, DaemonProc, doc_python_blocks, doc_section, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/web.md"


def test_serving_the_view(at_docs_daemon: DaemonProc, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "Serving the view")
    run_doc_block(block, f"{GUIDE}#serving-the-view")
    assert capsys.readouterr().out == "True\n"


def test_the_guide_documents_every_web_key() -> None:
    guide = doc_section(GUIDE, "Web view")
    data = tomllib.loads((ROOT / "conf" / "phloem.toml").read_text())
    for key in data["web"]:
        assert f"`web.{key}`" in guide, f"web.{key} is not documented in {GUIDE}"
