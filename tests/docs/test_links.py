"""Links between the README and docs/ hold: every relative link names a file that exists
and, with a `#fragment`, a heading of it (as GitHub makes anchors); every page of docs/ is
linked from the README or from docs/index.md."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ROOT, doc_files, markdown_headings

INDEX = "docs/index.md"
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_FENCE = re.compile(r"^(```|~~~)")


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link outside code blocks and code spans; a
    link's text may run over lines."""
    prose = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        prose.append("" if fenced or _FENCE.match(line) else line)
    joined = _CODE_SPAN.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(prose))
    return [(joined.count("\n", 0, m.start()) + 1, m.group(1)) for m in _LINK.finditer(joined)]


def anchors(text: str) -> set[str]:
    """The fragment of every heading of `text`, as GitHub makes them: lower case, code
    marks and punctuation dropped, spaces as hyphens, repeats numbered `-1`, `-2`, ..."""
    seen: dict[str, int] = {}
    found = set()
    for _, _, title in markdown_headings(text):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(doc: str) -> list[str]:
    """The relative links of `doc` whose file or heading does not exist."""
    source = ROOT / doc
    broken = []
    for number, target in links(source.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        path, _, fragment = target.partition("#")
        file = (source.parent / path).resolve() if path else source
        if not file.exists():
            broken.append(f"{doc}:{number}: {target} (no such file)")
        elif (
            fragment
            and file.suffix == ".md"
            and fragment not in anchors(file.read_text(encoding="utf-8"))
        ):
            broken.append(f"{doc}:{number}: {target} (no heading #{fragment})")
    return broken


def linked_pages(doc: str) -> set[Path]:
    """The files that the relative links of `doc` point at."""
    source = ROOT / doc
    text = source.read_text(encoding="utf-8")
    return {
        (source.parent / target.partition("#")[0]).resolve()
        for _, target in links(text)
        if target.partition("#")[0] and not re.match(r"^[a-z][a-z0-9+.-]*:", target)
    }


def test_every_relative_link_resolves() -> None:
    broken = [entry for doc in doc_files() for entry in broken_links(doc)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_page_of_docs_is_linked_from_the_readme_or_the_index() -> None:
    linked = linked_pages("README.md") | linked_pages(INDEX)
    pages = [ROOT / doc for doc in doc_files() if doc.startswith("docs/")]
    orphans = [str(p.relative_to(ROOT)) for p in pages if p.resolve() not in linked]
    assert not orphans, f"pages linked from neither README.md nor {INDEX}: {orphans}"


def test_links_and_anchors_are_read_as_github_renders_them() -> None:
    text = (
        "# A `code` title: with (punctuation)\n\n## Same\n\n## Same\n\n"
        "[a](x.md#same-1) `[not](a-link.md)` ![image](pic.png) [web](https://example.org)\n"
        "```sh\n[not](a-link.md)\n```\n"
        "[a link over\ntwo lines](y.md)\n"
    )
    assert anchors(text) == {"a-code-title-with-punctuation", "same", "same-1"}
    assert links(text) == [(7, "x.md#same-1"), (7, "https://example.org"), (11, "y.md")]
