from __future__ import annotations

import random

import pytest
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from phloem.tools import PathGlob, RuleSet, split_glob_list

pytestmark = pytest.mark.timeout(30)

ATOMS = ["a", "b", "log", "build", "x.y", "*", "**", "?", "[ab]", "*.log", "*.tmp", "c.d.e"]
NAMES = ["a", "b", "a.log", "b.tmp", "build", "x.y", "c.d.e", ".log", "ab", "a.b.log", "log"]


def _reference(rules: list[str], path: str, is_dir: bool) -> bool | None:
    """pathspec's verdict for the entry itself: the last rule whose expression matches the
    path (not merely one of its parent directories)."""
    candidate = path + ("/" if is_dir else "")
    for line in reversed(rules):
        pattern = GitIgnoreSpecPattern(line)
        assert pattern.regex is not None
        found = pattern.regex.match(candidate)
        if found is None:
            continue
        if found.groupdict().get("ps_d") is not None and found.end("ps_d") != len(candidate):
            continue
        return pattern.include
    return None


def test_the_fast_matcher_agrees_with_pathspec_on_random_rules() -> None:
    rng = random.Random(11)
    for _ in range(600):
        lines = []
        for _ in range(rng.randint(1, 6)):
            pattern = "/".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 3)))
            pattern = ("/" if rng.random() < 0.2 else "") + pattern
            pattern += "/" if rng.random() < 0.3 else ""
            lines.append(("!" if rng.random() < 0.3 else "") + pattern)
        rules = RuleSet(lines)
        for _ in range(8):
            path = "/".join(rng.choice(NAMES) for _ in range(rng.randint(1, 3)))
            is_dir = rng.random() < 0.4
            assert rules.match(path, is_dir) == _reference(rules.rules, path, is_dir), (
                lines,
                path,
                is_dir,
            )


def test_path_globs_select_with_last_match_negation_and_anchoring() -> None:
    glob = PathGlob(["*.go", "!vendor/**", "/README.md"])
    assert [glob.matches(p) for p in ("main.go", "src/main.go", "vendor/x.go")] == [
        True,
        True,
        False,
    ]
    assert glob.matches("README.md") and not glob.matches("docs/README.md")
    assert split_glob_list(" *.go, , docs/** ,!vendor/** ") == ["*.go", "docs/**", "!vendor/**"]
    assert PathGlob(["[oops"]).errors[0].line == 1
