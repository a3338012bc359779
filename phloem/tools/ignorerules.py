"""Gitignore-style rule lists, compiled with `pathspec`.

One `RuleSet` is the rules of one ignore file (or one glob list), matched against paths
relative to the directory that holds it. The answer for a path is the last rule that
matches it: `True` (matched by a plain rule), `False` (matched by a `!` rule) or `None`.
A malformed rule is skipped and reported with its 1-based line, so a caller can warn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

MAX_RULES = 10_000
"""Rules kept from one list; the rest are reported as malformed (over the limit)."""


@dataclass(frozen=True)
class BadRule:
    """A rule that could not be compiled: its 1-based line and text."""

    line: int
    text: str
    reason: str


def _is_blank_or_comment(line: str) -> bool:
    return not line.strip() or line.startswith("#")


class RuleSet:
    """Compiled gitignore rules; `match(path)` gives the last matching rule's verdict."""

    __slots__ = ("_combined", "_spec", "bad", "rules")

    def __init__(self, lines: list[str]) -> None:
        patterns: list[GitIgnoreSpecPattern] = []
        self.bad: list[BadRule] = []
        self.rules: list[str] = []
        for number, raw in enumerate(lines, start=1):
            line = raw.rstrip("\r\n")
            if _is_blank_or_comment(line):
                continue
            if len(patterns) >= MAX_RULES:
                self.bad.append(BadRule(number, line, f"more than {MAX_RULES} rules"))
                continue
            try:
                pattern = GitIgnoreSpecPattern(line)
            except (ValueError, re.error) as exc:
                self.bad.append(BadRule(number, line, str(exc)))
                continue
            if pattern.include is None or pattern.regex is None:
                self.bad.append(BadRule(number, line, "malformed pattern"))
                continue
            patterns.append(pattern)
            self.rules.append(line)
        self._spec = GitIgnoreSpec(patterns) if patterns else None
        self._combined = _combine(patterns)

    def __bool__(self) -> bool:
        return self._spec is not None

    def match(self, path: str, is_dir: bool = False) -> bool | None:
        """Verdict of the last rule matching slash-separated `path` (None: no rule)."""
        if self._spec is None:
            return None
        candidate = path + "/" if is_dir else path
        if self._combined is not None:
            found = self._combined.match(candidate)
            if found is None:
                return None
            group = found.lastgroup
            return group is not None and group.startswith("i")
        return self._spec.check_file(candidate).include


_GROUP = re.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>")
_BACKREF = re.compile(r"\(\?P=")


def _combine(patterns: list[GitIgnoreSpecPattern]) -> re.Pattern[str] | None:
    """One alternation, last rule first, so the first alternative that matches is the
    last rule that matches; each alternative ends in a group naming its verdict.

    Falls back to per-rule matching (returns None) when a regex cannot be combined.
    """
    if not patterns:
        return None
    parts: list[str] = []
    for index in range(len(patterns) - 1, -1, -1):
        pattern = patterns[index]
        regex = pattern.regex
        if regex is None:
            return None
        source = regex.pattern
        if not isinstance(source, str) or _BACKREF.search(source):
            return None
        source = _GROUP.sub("(?:", source)
        verdict = "i" if pattern.include else "x"
        parts.append(f"(?:{source})(?P<{verdict}{index}>)")
    try:
        return re.compile("|".join(parts))
    except re.error:
        return None


def split_glob_list(text: str) -> list[str]:
    """Split a comma-separated glob list, trimming blanks and dropping empty items."""
    return [item.strip() for item in text.split(",") if item.strip()]


class PathGlob:
    """A gitignore-style glob list used as a selector: a path is selected when the last
    matching pattern is a plain one (`*.go`, `/README.md`), not a `!` one."""

    __slots__ = ("_rules", "errors", "patterns")

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = list(patterns)
        self._rules = RuleSet(self.patterns)
        self.errors = self._rules.bad

    def matches(self, path: str, is_dir: bool = False) -> bool:
        return self._rules.match(path.strip("/"), is_dir) is True
