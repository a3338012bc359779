"""docs/differences.md: one table per reference system, every row filled in, linked from
the docs' index."""

from __future__ import annotations

from tests.helpers import ROOT

PAGE = ROOT / "docs" / "differences.md"
HEADER = "| system | item | phloem does | reason |"


def sections() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current = ""
    for line in PAGE.read_text().splitlines():
        if line.startswith("## "):
            current = line[3:]
            found[current] = []
        elif current and line.startswith("|"):
            found[current].append(line)
    return found


def test_each_reference_system_has_a_table_of_deviations_with_reasons() -> None:
    tables = sections()
    for title in ("erlang_adk (seeds 000, 002)", "ADK Java planners (seed 003)"):
        rows = tables[title]
        assert rows[0] == HEADER and rows[1].startswith("| ---")
        assert len(rows) > 2
        for row in rows[2:]:
            cells = [c.strip() for c in row.replace("\\|", "/").strip("|").split("|")]
            assert len(cells) == 4 and all(cells), row


def test_the_index_links_the_page() -> None:
    assert "(differences.md)" in (ROOT / "docs" / "index.md").read_text()
