"""Deterministic workspace walking: pre-order, lexical, bounded, gitignore-aware.

Entries come parent first, siblings in code-point order of their names, paths relative to
the workspace root with `/` separators. Symlinks are reported (type `symlink`) but never
descended. Nested `.gitignore` files and `.git/info/exclude` are honoured when asked: a
deeper file overrides a shallower one, `.git/info/exclude` ranks lowest, and inside one
file the last matching rule wins. A malformed rule is skipped with the warning
`walk.invalid_ignore_pattern` naming its file and line. Walks stop at `max_visited`
examined entries or `max_results` emitted ones and say so (`truncated`).

Everything below the root is reached through directory descriptors: each directory is
opened relative to its parent's descriptor with `O_NOFOLLOW | O_DIRECTORY` and listed with
`os.scandir(fd)`, and files (ignore files, and through `Tree` the files grep reads) are
opened relative to their parent's descriptor with `O_NOFOLLOW`. A directory swapped for a
symlink while a walk runs is therefore never followed out of the root: the open fails and
the directory is skipped, as if it had gone. (Opening by path, as before, let ls, find and
grep return names and content from outside the root in such a race.)
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from phloem.protocols.limits import check_range
from phloem.protocols.warnings import RunWarning
from phloem.tools.errors import ToolFailure
from phloem.tools.fsroot import DIR_FLAGS, FILE_FLAGS, Tree, components
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
GITIGNORE = ".gitignore"


WalkWarning = RunWarning
"""A warning of the walk (`source` "walk", workspace-relative `path`, 1-based `line`)."""


class Entry(NamedTuple):
    """One walked entry: relative path, type (`file`, `dir`, `symlink`, `other`), depth
    (1 for a child of the start) and, when the filter asks for it (`with_stat`), its
    `lstat` taken through its parent's descriptor. (A tuple: walks make many.)"""

    path: str
    type: str
    depth: int
    info: os.stat_result | None = None


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
    with_stat: bool = False
    """Fill `Entry.info` (an entry that vanished before it could be stat'ed is skipped)."""

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
    """Reads ignore files (relative to a directory descriptor, never through a symlink)."""

    def __init__(self, warn: Callable[[WalkWarning], None]) -> None:
        self.warn = warn

    def load(self, dir_fd: int, name: str, relative: str) -> RuleSet | None:
        """The rules of the regular file `name` in the directory `dir_fd`, or None."""
        try:
            descriptor = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                return None
            if info.st_size > MAX_IGNORE_FILE_BYTES:
                self.warn(
                    RunWarning.of(
                        IGNORE_FILE_TOO_LARGE,
                        f"larger than {MAX_IGNORE_FILE_BYTES} bytes ({info.st_size})",
                        path=relative,
                        source="walk",
                    )
                )
                return None
            data = os.read(descriptor, MAX_IGNORE_FILE_BYTES)
        except OSError:
            return None
        finally:
            os.close(descriptor)
        text = data.decode("utf-8", errors="replace")
        rules = RuleSet(text.removeprefix("\ufeff").split("\n"))
        for bad in rules.bad:
            self.warn(
                RunWarning.of(
                    INVALID_IGNORE_PATTERN, bad.reason, path=relative, line=bad.line, source="walk"
                )
            )
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

    `root` is the workspace's real path; `result` receives truncation and warnings. A
    `start` that cannot be opened as a directory without following a symlink yields
    nothing.
    """

    def record(warning: WalkWarning) -> None:
        result.warnings.append(warning)
        if warn is not None:
            warn(warning)

    max_visited = flt.max_visited or DEFAULT_MAX_VISITED
    max_results = flt.max_results or DEFAULT_MAX_RESULTS
    include = PathGlob(flt.include_globs) if flt.include_globs else None
    exclude = PathGlob(flt.exclude_globs) if flt.exclude_globs else None
    ignores = _Ignores(record)
    stack: list[tuple[str, RuleSet]] = []
    start_rel = "/".join(components(start))
    with Tree(root) as tree:
        if flt.respect_gitignore:
            with contextlib.suppress(OSError):
                info_dir = tree.directory(".git/info")
                excluded = ignores.load(info_dir, "exclude", ".git/info/exclude")
                if excluded is not None:
                    stack.append(("", excluded))
            parts = start_rel.split("/") if start_rel else []
            for depth in range(len(parts) + 1):
                base = "/".join(parts[:depth])
                try:
                    directory = tree.directory(base)
                except OSError:
                    break
                name = f"{base}/{GITIGNORE}" if base else GITIGNORE
                rules = ignores.load(directory, GITIGNORE, name)
                if rules is not None:
                    stack.append((base, rules))
        try:
            start_fd = os.dup(tree.directory(start_rel))
        except OSError:
            return

    def descend(fd: int, directory_rel: str, depth: int) -> Iterator[Entry]:
        try:
            with os.scandir(fd) as scanner:
                children = sorted(scanner, key=lambda item: item.name)
        except OSError:
            children = []
        pushed = False
        if flt.respect_gitignore and depth > 0 and any(c.name == GITIGNORE for c in children):
            name = f"{directory_rel}/{GITIGNORE}"
            rules = ignores.load(fd, GITIGNORE, name)
            if rules is not None:
                stack.append((directory_rel, rules))
                pushed = True
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
                    info = None
                    if flt.with_stat:
                        try:
                            info = child.stat(follow_symlinks=False)  # fstatat on `fd`
                        except OSError:
                            continue  # gone since it was listed
                    result.results += 1
                    yield Entry(path, kind, level, info)
                if is_dir and (flt.max_depth <= 0 or level < flt.max_depth):
                    try:
                        child_fd = os.open(name, DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        continue  # gone, or swapped for a symlink or a file: not entered
                    try:
                        yield from descend(child_fd, path, level)
                    finally:
                        os.close(child_fd)
        finally:
            if pushed:
                stack.pop()

    try:
        yield from descend(start_fd, start_rel, 0)
    finally:
        os.close(start_fd)
