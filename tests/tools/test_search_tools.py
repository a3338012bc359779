from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from phloem.tools import ToolContext, ToolWarning, Workspace
from phloem.tools.find import FindTool
from phloem.tools.grep import GrepTool
from phloem.tools.grepsearch import MAX_GREP_FILE_BYTES, MAX_GREP_LINE_BYTES
from phloem.tools.ls import LsTool

from .conftest import Touches, seed

pytestmark = pytest.mark.timeout(20)


def test_grep_sorts_by_path_then_line_and_honours_gitignore(ctx: ToolContext, root: Path) -> None:
    seed(
        root,
        {
            ".gitignore": "ignored/\n",
            "ignored/x.txt": "hit\n",
            ".hidden/x.txt": "hit\n",
            "a/b.txt": "no\nhit 2\n",
            "a.txt": "hit 1\nhit again\n",
        },
    )
    result = GrepTool().run({"pattern": "hit"}, ctx)
    where = [(m["path"], m["line"]) for m in result["matches"]]
    assert where == [("a.txt", 1), ("a.txt", 2), ("a/b.txt", 2)]
    assert result["files"] == 2 and result["match_count"] == 3


def test_grep_literal_case_and_glob(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.py": "x = a.b(1)\nX = A.B(1)\n", "a.txt": "x = a.b(1)\n"})
    literal = GrepTool().run({"pattern": "a.b(", "literal": True, "glob": "*.py"}, ctx)
    assert [m["text"] for m in literal["matches"]] == ["x = a.b(1)"]
    folded = GrepTool().run(
        {"pattern": "a.b(", "literal": True, "case_insensitive": True, "glob": "*.py"}, ctx
    )
    assert len(folded["matches"]) == 2
    regex = GrepTool().run({"pattern": r"^X = [A-Z]\.", "glob": "*.py, !*.txt"}, ctx)
    assert [m["line"] for m in regex["matches"]] == [2]
    bad = GrepTool().run({"pattern": "("}, ctx)
    assert bad["error"] == "arguments"


def test_grep_context_lines_and_a_match_never_spans_lines(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "1\n2\nfoo\n4\n5\n6\n", "b.txt": "foo\nbar\n"})
    result = GrepTool().run({"pattern": "foo", "path": "a.txt", "context_lines": 2}, ctx)
    assert result["matches"] == [
        {"path": "a.txt", "line": 3, "text": "foo", "before": ["1", "2"], "after": ["4", "5"]}
    ]
    spanning = GrepTool().run({"pattern": r"foo\sbar"}, ctx)
    assert spanning["matches"] == []


def test_grep_result_cap_is_exact(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "x\n" * 3})
    exact = GrepTool().run({"pattern": "x", "max_results": 3}, ctx)
    assert exact["match_count"] == 3 and exact["truncated"] is False
    capped = GrepTool().run({"pattern": "x", "max_results": 2}, ctx)
    assert capped["match_count"] == 2 and capped["truncated"] is True


def test_grep_skips_binary_huge_files_and_long_lines(ctx: ToolContext, root: Path) -> None:
    seed(
        root,
        {
            "bin.dat": b"x\x00x",
            "big.txt": b"x" * (MAX_GREP_FILE_BYTES + 1),
            "edge.txt": b"y\n" * (MAX_GREP_FILE_BYTES // 2 - 1) + b"x\n",
            "long.txt": b"x" * (MAX_GREP_LINE_BYTES + 1) + b"\nx\n",
        },
    )
    result = GrepTool().run({"pattern": "x", "max_results": 10}, ctx)
    assert result["skipped_binary"] == 1
    assert result["skipped_too_large"] == 1
    assert result["skipped_long_lines"] == 1
    assert [(m["path"], m["line"]) for m in result["matches"]] == [
        ("edge.txt", MAX_GREP_FILE_BYTES // 2),
        ("long.txt", 2),
    ]


def test_grep_touches_each_matching_file_once(
    ctx: ToolContext, root: Path, touches: Touches
) -> None:
    seed(root, {"a.txt": "x\nx\n", "b.txt": "x\n", "c.txt": "y\n"})
    GrepTool().run({"pattern": "x"}, ctx)
    assert [(t.kind, t.path) for t in touches] == [("search", "a.txt"), ("search", "b.txt")]


def test_find_by_glob_type_and_modification_time(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.go": "", "n/z.go": "", "n/y.go": "", "go.mod": "", ".h/x.go": ""})
    (root / "d.go").mkdir()
    now = time.time()
    os.utime(root / "n" / "y.go", (now + 100, now + 100))
    files = FindTool().run({"glob": "*.go", "type": "file"}, ctx)
    assert files == {"paths": ["a.go", "n/y.go", "n/z.go"], "truncated": False}
    dirs = FindTool().run({"glob": "*.go", "type": "dir"}, ctx)
    assert dirs["paths"] == ["d.go"]
    newest = FindTool().run({"glob": "*.go", "sort_by": "modified", "max_results": 1}, ctx)
    assert newest == {"paths": ["n/y.go"], "truncated": True}
    inside = FindTool().run({"glob": "/z.go", "path": "n"}, ctx)
    assert inside["paths"] == ["n/z.go"]
    assert FindTool().run({"glob": "*", "type": "fifo"}, ctx)["error"] == "arguments"


def test_ls_lists_directories_first_with_sizes_and_utc_times(ctx: ToolContext, root: Path) -> None:
    seed(root, {"b.txt": "bb", "a/c.txt": "c", ".h": ""})
    os.utime(root / "b.txt", (0, 0))
    result = LsTool().run({}, ctx)
    assert [(e["path"], e["type"]) for e in result["entries"]] == [("a", "dir"), ("b.txt", "file")]
    assert result["entries"][1]["size"] == 2
    assert result["entries"][1]["mod_time"] == "1970-01-01T00:00:00Z"
    deep = LsTool().run({"max_depth": 2, "show_hidden": True}, ctx)
    assert [e["path"] for e in deep["entries"]] == ["a", ".h", "a/c.txt", "b.txt"]
    capped = LsTool().run({"max_depth": 2, "max_results": 2}, ctx)
    assert capped["truncated"] is True and len(capped["entries"]) == 2


def test_grep_passes_malformed_gitignore_rules_on_as_warnings(root: Path) -> None:
    seed(root, {".gitignore": "*.log\n[bad\n", "a.log": "x\n", "a.txt": "x\n"})
    warnings: list[ToolWarning] = []
    ctx = ToolContext(workspace=Workspace(root), on_warning=warnings.append)
    result = GrepTool().run({"pattern": "x"}, ctx)
    assert [m["path"] for m in result["matches"]] == ["a.txt"]
    assert [(w.code, w.path, w.line) for w in warnings] == [
        ("walk.invalid_ignore_pattern", ".gitignore", 2)
    ]


@pytest.mark.parametrize(
    ("pattern", "found"),
    [
        ("(?i)HELLO world", True),
        ("(?i:HELLO) world", True),
        ("hel+o (wor)ld", True),
        ("hello (?:there|world)", True),
        ("hello\\s+planet", False),
        ("é", True),
        ("[[:alpha:]]+ world", True),
    ],
)
def test_the_required_literal_prefilter_never_hides_a_match(
    ctx: ToolContext, root: Path, pattern: str, found: bool
) -> None:
    seed(root, {"a.txt": "say hello world\ncafé\n"})
    result = GrepTool().run({"pattern": pattern}, ctx)
    assert (result["match_count"] > 0) is found


def test_grep_uses_re2_so_a_catastrophic_pattern_cannot_hang(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "a" * 100_000 + "b\n"})
    result = GrepTool().run({"pattern": "(a+)+$"}, ctx)  # exponential in backtracking engines
    assert result["match_count"] == 0
    backref = GrepTool().run({"pattern": r"(a)\1"}, ctx)
    assert backref["error"] == "arguments"
    assert backref["message"].startswith("pattern is not a valid RE2 regular expression")
