"""Deterministic workspace walking: pre-order, lexical, bounded, gitignore-aware.

Entries come parent first, siblings in code-point order of their names, paths relative to
the workspace root with `/` separators. Symlinks are reported (type `symlink`) but never
descended. Nested `.gitignore` files and `.git/info/exclude` are honoured when asked: a
deeper file overrides a shallower one, `.git/info/exclude` ranks lowest, and inside one
file the last matching rule wins. A malformed rule is skipped with the warning
`walk.invalid_ignore_pattern` naming its file and line. Walks stop at `max_visited`
examined entries or `max_results` emitted ones and say so (`truncated`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from phloem.limits import check_range
from phloem.tools.errors import ToolFailure
from phloem.tools.ignorerules import PathGlob, RuleSet

DEFAULT_MAX_VISITED = 100_000
DEFAULT_MAX_RESULTS = 20_000
MAX_WALK_LIMIT = 10_000_000
MAX_IGNORE_FILE_BYTES = 1 << 20
"""A larger .gitignore is skipped with a warning rather than read."""
VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", ".jj", ".fossil"})
INVALID_IGNORE_PATTERN = "walk.invalid_ignore_pattern"
IGNORE_FILE_TOO_LARGE = "walk.ignore_file_too_large"
CANCEL_CHECK_EVERY = 256


@dataclass(frozen=True)
class WalkWarning:
    """A warning from the walk: stable `code`, workspace-relative `path`, 1-based `line`."""

    code: str
    path: str
    line: int
    message: str
    source: str = "walk"


class Entry(NamedTuple):
    """One walked entry: relative path, type (`file`, `dir`, `symlink`, `other`), depth
    (1 for a child of the start) and the absolute path. (A tuple: walks make many.)"""

    path: str
    type: str
    depth: int
    absolute: str


@dataclass
class WalkFilter:
    """What a walk visits and yields; limits of 0 take the defaults, max_depth <= 0 is
    unlimited. Include globs select files (directories are always yielded unless
    excluded); exclude globs prune files and directories."""

    include_globs: list[str] = field(default_factory=list)
    exclude_globs: list[str] = field(default_factory=list)
    skip_hidden: bool = True
    skip_vcs: bool = True
    respect_gitignore: bool = False
    max_depth: int = -1
    max_visited: int = 0
    max_results: int = 0
    yield_dirs: bool = True

    def __post_init__(self) -> None:
        for name in ("max_visited", "max_results"):
            check_range(name, getattr(self, name), 0, MAX_WALK_LIMIT)


@dataclass
class WalkResult:
    """Filled in as the walk proceeds: whether a limit stopped it, and counters."""

    truncated: bool = False
    visited: int = 0
    results: int = 0
    warnings: list[WalkWarning] = field(default_factory=list)


def _type_of(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "symlink"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    if entry.is_file(follow_symlinks=False):
        return "file"
    return "other"


class _Ignores:
    """The stack of ignore rule sets in force for one directory."""

    def __init__(self, root: str, warn: Callable[[WalkWarning], None]) -> None:
        self.root = root
        self.warn = warn

    def load(self, absolute: str, relative: str) -> RuleSet | None:
        try:
            size = os.stat(absolute).st_size
            if size > MAX_IGNORE_FILE_BYTES:
                self.warn(
                    WalkWarning(IGNORE_FILE_TOO_LARGE, relative, 0, f"larger than {size} bytes")
                )
                return None
            with open(absolute, "rb") as handle:
                text = handle.read(MAX_IGNORE_FILE_BYTES).decode("utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return None
        rules = RuleSet(text.removeprefix("\ufeff").split("\n"))
        for bad in rules.bad:
            self.warn(WalkWarning(INVALID_IGNORE_PATTERN, relative, bad.line, bad.reason))
        return rules if rules else None


def _rel(base: str, path: str) -> str:
    return path if not base else path[len(base) + 1 :]


def _ignored(stack: list[tuple[str, RuleSet]], path: str, is_dir: bool) -> bool:
    for base, rules in reversed(stack):
        verdict = rules.match(_rel(base, path), is_dir)
        if verdict is not None:
            return verdict
    return False


def walk(
    root: str,
    start: str,
    flt: WalkFilter,
    result: WalkResult,
    cancel: threading.Event | None = None,
    warn: Callable[[WalkWarning], None] | None = None,
) -> Iterator[Entry]:
    """Yield entries below `start` (a workspace-relative directory, "." for the root).

    `root` is the workspace's real path; `result` receives truncation and warnings.
    """

    def record(warning: WalkWarning) -> None:
        result.warnings.append(warning)
        if warn is not None:
            warn(warning)

    max_visited = flt.max_visited or DEFAULT_MAX_VISITED
    max_results = flt.max_results or DEFAULT_MAX_RESULTS
    include = PathGlob(flt.include_globs) if flt.include_globs else None
    exclude = PathGlob(flt.exclude_globs) if flt.exclude_globs else None
    ignores = _Ignores(root, record)
    stack: list[tuple[str, RuleSet]] = []
    start_rel = "" if start in ("", ".") else start.strip("/")
    if flt.respect_gitignore:
        excluded = ignores.load(os.path.join(root, ".git", "info", "exclude"), ".git/info/exclude")
        if excluded is not None:
            stack.append(("", excluded))
        parts = start_rel.split("/") if start_rel else []
        for depth in range(len(parts) + 1):
            base = "/".join(parts[:depth])
            name = f"{base}/.gitignore" if base else ".gitignore"
            rules = ignores.load(os.path.join(root, name), name)
            if rules is not None:
                stack.append((base, rules))

    def descend(directory_rel: str, depth: int) -> Iterator[Entry]:
        absolute = os.path.join(root, directory_rel) if directory_rel else root
        pushed = False
        if flt.respect_gitignore and depth > 0:
            name = f"{directory_rel}/.gitignore"
            rules = ignores.load(os.path.join(root, name), name)
            if rules is not None:
                stack.append((directory_rel, rules))
                pushed = True
        try:
            with os.scandir(absolute) as scanner:
                children = sorted(scanner, key=lambda item: item.name)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            children = []
        try:
            for child in children:
                if result.truncated:
                    return
                result.visited += 1
                if result.visited > max_visited:
                    result.truncated = True
                    return
                checkpoint = result.visited % CANCEL_CHECK_EVERY == 0
                if checkpoint and cancel is not None and cancel.is_set():
                    raise ToolFailure("cancelled", "the tool call was cancelled")
                name = child.name
                if flt.skip_vcs and name in VCS_DIRS:
                    continue
                if flt.skip_hidden and name.startswith("."):
                    continue
                kind = _type_of(child)
                is_dir = kind == "dir"
                path = f"{directory_rel}/{name}" if directory_rel else name
                if stack and _ignored(stack, path, is_dir):
                    continue
                if exclude is not None and exclude.matches(path, is_dir):
                    continue
                level = depth + 1
                wanted = is_dir and flt.yield_dirs
                if not is_dir:
                    wanted = include is None or include.matches(path)
                if wanted:
                    if result.results >= max_results:
                        result.truncated = True
                        return
                    result.results += 1
                    yield Entry(path, kind, level, child.path)
                if is_dir and (flt.max_depth <= 0 or level < flt.max_depth):
                    yield from descend(path, level)
        finally:
            if pushed:
                stack.pop()

    yield from descend(start_rel, 0)
