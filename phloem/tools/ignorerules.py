"""Gitignore-style rule lists, compiled with `pathspec`.

One `RuleSet` is the rules of one ignore file (or one glob list), matched against paths
relative to the directory that holds it. The answer for a path is the last rule that
matches it: `True` (matched by a plain rule), `False` (matched by a `!` rule) or `None`.
A malformed rule is skipped and reported with its 1-based line, so a caller can warn.

`pathspec` parses every rule and supplies its regular expression. Matching is arranged
for speed, with the same answers: plain names (`build`) and extensions (`*.log`) are
looked up in dictionaries, other rules without a slash are tried against the base name
only, and the rest against the whole path; each group is one combined expression whose
alternatives run from the last rule to the first, so the first hit is the last match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from phloem.tools.workspace import shown

MAX_RULES = 10_000
"""Rules kept from one list; the rest are reported as malformed (over the limit)."""

_ANY_DIR_PREFIX = "^(?:.+/)?"
_GLOB_CHARS = frozenset("*?[]\\ /")
_BRACE = re.compile(r"(?<!\\)[{}]")
_GROUP = re.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>")
_BACKREF = re.compile(r"\(\?P=")


@dataclass(frozen=True)
class BadRule:
    """A rule that could not be compiled: its 1-based line and text."""

    line: int
    text: str
    reason: str


def _is_blank_or_comment(line: str) -> bool:
    return not line.strip() or line.startswith("#")


def _combine(alternatives: list[tuple[int, str]]) -> re.Pattern[str] | None:
    """One expression over (index, regex) pairs, highest index first; group `r<index>`."""
    if not alternatives:
        return None
    parts = []
    for index, source in sorted(alternatives, reverse=True):
        parts.append(f"(?:{_GROUP.sub('(?:', source)})(?P<r{index}>)")
    return re.compile("|".join(parts))


def _hit(pattern: re.Pattern[str] | None, text: str) -> int:
    if pattern is None:
        return -1
    found = pattern.match(text)
    if found is None or found.lastgroup is None:
        return -1
    return int(found.lastgroup[1:])


class RuleSet:
    """Compiled gitignore rules; `match(path)` gives the last matching rule's verdict.

    `match` judges one entry by its own path, as git does while walking: it does not ask
    whether an ancestor directory is matched (a walk never enters an ignored directory).
    """

    __slots__ = (
        "_base",
        "_exact",
        "_exact_dir",
        "_ext",
        "_ext_dir",
        "_include",
        "_path",
        "_path_any",
        "bad",
        "rules",
    )

    def __init__(self, lines: list[str]) -> None:
        # pathspec loads with the first rule list, not with the tools
        from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

        self.bad: list[BadRule] = []
        self.rules: list[str] = []
        self._include: list[bool] = []
        self._exact: dict[str, int] = {}
        self._exact_dir: dict[str, int] = {}
        self._ext: dict[str, int] = {}
        self._ext_dir: dict[str, int] = {}
        base: list[tuple[int, str]] = []
        self._path: list[tuple[int, re.Pattern[str]]] = []
        for number, raw in enumerate(lines, start=1):
            line = raw.rstrip("\r\n")
            if _is_blank_or_comment(line):
                continue
            if len(self.rules) >= MAX_RULES:
                self.bad.append(BadRule(number, line, f"more than {MAX_RULES} rules"))
                continue
            if _BRACE.search(line):
                # plasmid's ignore subset has no brace expansion: `{a,b}` is a malformed
                # rule (skipped, warned), never a literal nor an alternation.
                self.bad.append(BadRule(number, line, "brace expansion is not supported"))
                continue
            try:
                pattern = GitIgnoreSpecPattern(line)
            except (ValueError, re.error) as exc:
                self.bad.append(BadRule(number, line, str(exc)))
                continue
            regex = pattern.regex
            if pattern.include is None or regex is None or not isinstance(regex.pattern, str):
                self.bad.append(BadRule(number, line, "malformed pattern"))
                continue
            if _BACKREF.search(regex.pattern):
                self.bad.append(BadRule(number, line, "unsupported pattern"))
                continue
            index = len(self.rules)
            self.rules.append(line)
            self._include.append(bool(pattern.include))
            self._classify(index, line, regex, base)
        self._base = _combine(base)
        self._path.reverse()
        self._path_any = _combine([(i, regex.pattern) for i, regex in self._path])

    def _classify(
        self,
        index: int,
        line: str,
        regex: re.Pattern[str],
        base: list[tuple[int, str]],
    ) -> None:
        source = regex.pattern
        body = line[1:] if line.startswith("!") else line
        dir_only = body.endswith("/")
        body = body[:-1] if dir_only else body
        simple = bool(body) and not (_GLOB_CHARS & set(body))
        if simple:
            (self._exact_dir if dir_only else self._exact)[body] = index
            return
        rest = body[2:]
        if body.startswith("*.") and rest and not (_GLOB_CHARS & set(rest)) and "." not in rest:
            (self._ext_dir if dir_only else self._ext)[rest] = index
            return
        if "/" not in body and source.startswith(_ANY_DIR_PREFIX):
            base.append((index, "^" + source[len(_ANY_DIR_PREFIX) :]))
        else:
            self._path.append((index, regex))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def match(self, path: str, is_dir: bool = False) -> bool | None:
        """Verdict of the last rule matching the entry at slash-separated `path`."""
        if not self.rules:
            return None
        name = path.rsplit("/", 1)[-1]
        best = self._exact.get(name, -1)
        dot = name.rfind(".")
        if dot >= 0 and self._ext:
            best = max(best, self._ext.get(name[dot + 1 :], -1))
        if is_dir:
            best = max(best, self._exact_dir.get(name, -1))
            if dot >= 0 and self._ext_dir:
                best = max(best, self._ext_dir.get(name[dot + 1 :], -1))
        suffix = "/" if is_dir else ""
        best = max(best, _hit(self._base, name + suffix))
        candidate = path + suffix
        # One combined match finds the last path rule that matches at all; only when that
        # match is through an ancestor directory are the earlier rules tried one by one.
        first = _hit(self._path_any, candidate)
        for index, regex in self._path if first > best else ():
            if index > first:
                continue
            if index <= best:
                break
            found = regex.match(candidate)
            if found is None:
                continue
            mark = found.groupdict().get("ps_d")
            if mark is None or found.end("ps_d") == len(candidate):
                best = index
                break
        return self._include[best] if best >= 0 else None


def split_glob_list(text: str) -> list[str]:
    """Split a comma-separated glob list, trimming blanks and dropping empty items."""
    return [item.strip() for item in text.split(",") if item.strip()]


class PathGlob:
    """A gitignore-style glob list used as a selector: a path is selected when the last
    matching pattern is a plain one (`*.go`, `/README.md`), not a `!` one."""

    __slots__ = ("_spec", "errors", "patterns")

    def __init__(self, patterns: list[str]) -> None:
        from pathspec import GitIgnoreSpec

        self.patterns = list(patterns)
        rules = RuleSet(self.patterns)
        self.errors = rules.bad
        self._spec = GitIgnoreSpec.from_lines(rules.rules) if rules.rules else None

    def matches(self, path: str, is_dir: bool = False) -> bool:
        """True when the last matching pattern (for the path or a parent) is a plain one."""
        if self._spec is None:
            return False
        candidate = shown(path).strip("/") + ("/" if is_dir else "")
        return self._spec.check_file(candidate).include is True
