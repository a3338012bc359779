from __future__ import annotations

import os
from pathlib import Path

import pytest

from phloem.tools.fsroot import Tree
from phloem.tools.walk import WalkFilter, WalkResult, WalkWarning, walk

from .conftest import seed

pytestmark = pytest.mark.timeout(20)


def _paths(root: Path, flt: WalkFilter, start: str = ".") -> tuple[list[str], WalkResult]:
    result = WalkResult()
    return [e.path for e in walk(os.path.realpath(root), start, flt, result)], result


def test_walk_is_preorder_and_lexical(root: Path) -> None:
    seed(root, {"b.txt": "", "a/z.txt": "", "a/b/c.txt": "", "a.txt": "", "B.txt": ""})
    paths, _ = _paths(root, WalkFilter())
    assert paths == ["B.txt", "a", "a/b", "a/b/c.txt", "a/z.txt", "a.txt", "b.txt"]


def test_nested_gitignore_overrides_its_parent_and_info_exclude_ranks_lowest(
    root: Path,
) -> None:
    seed(
        root,
        {
            ".git/info/exclude": "*.bak\n!keep.tmp\n",
            ".gitignore": "*.tmp\nbuild/\n/only-root.txt\n",
            "x.tmp": "",
            "keep.tmp": "",
            "a.bak": "",
            "only-root.txt": "",
            "sub/only-root.txt": "",
            "build/out.o": "",
            "sub/build/out.o": "",
            "sub/.gitignore": "!*.tmp\n",
            "sub/y.tmp": "",
        },
    )
    paths, result = _paths(root, WalkFilter(respect_gitignore=True))
    assert paths == ["sub", "sub/only-root.txt", "sub/y.tmp"]
    assert result.warnings == []


def test_a_malformed_rule_is_skipped_with_its_file_and_line(root: Path) -> None:
    seed(root, {"d/.gitignore": "# c\n\n[oops\n*.log\n", "d/a.log": "", "d/b.txt": ""})
    seen: list[WalkWarning] = []
    result = WalkResult()
    flt = WalkFilter(respect_gitignore=True)
    paths = [e.path for e in walk(os.path.realpath(root), ".", flt, result, warn=seen.append)]
    assert paths == ["d", "d/b.txt"]
    assert [(w.code, w.path, w.line) for w in seen] == [
        ("walk.invalid_ignore_pattern", "d/.gitignore", 3)
    ]


def test_symlinks_are_reported_but_never_descended(root: Path) -> None:
    seed(root, {"real/f.txt": ""})
    (root / "link").symlink_to(root / "real")
    result = WalkResult()
    entries = list(walk(os.path.realpath(root), ".", WalkFilter(), result))
    assert [(e.path, e.type) for e in entries] == [
        ("link", "symlink"),
        ("real", "dir"),
        ("real/f.txt", "file"),
    ]


def test_result_cap_is_exact(root: Path) -> None:
    seed(root, {f"f{i}.txt": "" for i in range(5)})
    paths, result = _paths(root, WalkFilter(max_results=5))
    assert len(paths) == 5 and not result.truncated
    paths, result = _paths(root, WalkFilter(max_results=4))
    assert len(paths) == 4 and result.truncated


def test_visit_cap_stops_the_walk(root: Path) -> None:
    seed(root, {f"f{i}.txt": "" for i in range(5)})
    paths, result = _paths(root, WalkFilter(max_visited=5))
    assert len(paths) == 5 and not result.truncated
    paths, result = _paths(root, WalkFilter(max_visited=3))
    assert paths == ["f0.txt", "f1.txt", "f2.txt"] and result.truncated


def test_hidden_and_vcs_directories_are_skipped_on_request(root: Path) -> None:
    seed(root, {".git/config": "", ".env": "", ".hg/x": "", "v.txt": ""})
    assert _paths(root, WalkFilter())[0] == ["v.txt"]
    shown, _ = _paths(root, WalkFilter(skip_hidden=False))
    assert shown == [".env", "v.txt"]
    everything, _ = _paths(root, WalkFilter(skip_hidden=False, skip_vcs=False))
    assert everything == [".env", ".git", ".git/config", ".hg", ".hg/x", "v.txt"]


def test_a_walk_from_a_subdirectory_applies_ancestor_gitignores(root: Path) -> None:
    seed(root, {".gitignore": "*.log\n", "src/a.log": "", "src/a.py": ""})
    paths, _ = _paths(root, WalkFilter(respect_gitignore=True), start="src")
    assert paths == ["src/a.py"]


def test_walk_limits_are_validated() -> None:
    with pytest.raises(ValueError, match=r"^invalid_argument: max_results must be between 0 and "):
        WalkFilter(max_results=-1)


def test_a_directory_swapped_for_a_symlink_mid_walk_is_not_entered(
    root: Path, tmp_path: Path
) -> None:
    seed(root, {"sub/inside.txt": "", "z.txt": ""})
    outside = tmp_path / "outside"
    seed(outside, {"secret.txt": ""})
    entries = walk(os.path.realpath(root), ".", WalkFilter(), WalkResult())
    assert next(entries).path == "sub"  # pre-order: "sub" comes before its contents
    (root / "sub").rename(root / ".held")
    (root / "sub").symlink_to(outside)  # swapped before the walk opens it
    assert [e.path for e in entries] == ["z.txt"]


def test_the_tree_opens_nothing_through_a_symlink(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    seed(outside, {"secret.txt": "s"})
    seed(root, {"real/file.txt": "f"})
    (root / "link").symlink_to(outside)
    (root / "real" / "linked.txt").symlink_to(outside / "secret.txt")
    with Tree(os.path.realpath(root)) as tree:
        os.close(tree.open_file("real/file.txt"))
        for path in ("link/secret.txt", "real/linked.txt"):
            with pytest.raises(OSError):
                tree.open_file(path)
        with pytest.raises(OSError):
            tree.directory("link")
        assert tree.lstat("link").st_size == len(str(outside))  # the link itself


def test_a_gitignore_that_is_a_symlink_is_not_followed(root: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.write_text("*.txt\n")
    seed(root, {"a.txt": "", "b.md": ""})
    (root / ".gitignore").symlink_to(rules)  # as git: a symlinked .gitignore is ignored
    paths, _ = _paths(root, WalkFilter(respect_gitignore=True))
    assert paths == ["a.txt", "b.md"]
