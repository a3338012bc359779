"""No Python example of the README or docs/ goes unrun: each sits in a section that some
test takes its blocks from (`doc_python_blocks(doc, title)`, found in the tests' source)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tests.helpers import ROOT, doc_files, markdown_headings

RUNNER = "doc_python_blocks"
"""The helper whose calls name the sections a test runs."""


def _string(arg: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Name):
        return constants.get(arg.id)
    return None


def sections_run(source: str) -> Iterator[tuple[str, str]]:
    """(doc, title) of every `doc_python_blocks(doc, title)` call in a test module's
    `source` whose two arguments are string literals or module-level string constants."""
    tree = ast.parse(source)
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == RUNNER
            and len(node.args) == 2
        ):
            doc, title = (_string(arg, constants) for arg in node.args)
            if doc is not None and title is not None:
                yield doc, title


def unrun_blocks(text: str, titles: set[str]) -> list[int]:
    """The line numbers (1-based) of the ```python fences of Markdown `text` that lie in
    no section titled one of `titles` (a section holds its subsections)."""
    lines = text.splitlines()
    headings = markdown_headings(text)
    ranges = []
    for index, (start, level, title) in enumerate(headings):
        if title in titles:
            end = next((i for i, lv, _ in headings[index + 1 :] if lv <= level), len(lines))
            ranges.append(range(start, end))
    fences = [i for i, line in enumerate(lines) if re.fullmatch(r"```python\s*", line)]
    return [i + 1 for i in fences if not any(i in r for r in ranges)]


def test_every_python_example_is_run_by_a_test() -> None:
    run = [
        pair
        for path in sorted(ROOT.glob("tests/**/*.py"))
        for pair in sections_run(path.read_text(encoding="utf-8"))
    ]
    unrun = [
        f"{doc}:{line}"
        for doc in doc_files()
        for line in unrun_blocks(
            (ROOT / doc).read_text(encoding="utf-8"), {title for d, title in run if d == doc}
        )
    ]
    assert not unrun, (
        f"Python examples no test runs: {', '.join(unrun)}. Run each from a test with "
        "doc_python_blocks(doc, section) and run_doc_block (tests/helpers.py), checking "
        "what it prints (see docs/development.md#docs)."
    )


def test_the_checker_reads_literals_and_constants_only() -> None:
    source = (
        'GUIDE = "docs/x.md"\n'
        "def test_a():\n"
        '    doc_python_blocks(GUIDE, "A")\n'
        '    doc_python_blocks("docs/y.md", "B")\n'
        "    doc_python_blocks(GUIDE, computed())\n"
        '    doc_blocks(GUIDE, "C", "sh")\n'
    )
    assert sorted(sections_run(source)) == [("docs/x.md", "A"), ("docs/y.md", "B")]


def test_the_checker_finds_a_block_outside_every_section_run() -> None:
    text = (
        "# Guide\n\n## Run\n\n```python\nprint(1)\n```\n\n### Inside\n\n```python\n```\n\n"
        "## Not run\n\n```python\nprint(2)\n```\n\n```sh\n# ## not a heading\n```\n"
    )
    assert unrun_blocks(text, {"Run"}) == [16]
    assert unrun_blocks(text, {"Guide"}) == []
    assert unrun_blocks(text, set()) == [5, 11, 16]
