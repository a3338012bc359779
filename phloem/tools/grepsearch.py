"""The searching half of the `grep` tool: find matching lines in a list of files.

Kept apart from `phloem.tools.grep` (the tool: arguments, walk, shards, result) with few
imports, so that a shard child (see `grep`) starts fast: the fork server defers the
`phloem.tools` package initialiser, and this module needs only RE2, `walk.Tree` and the
output policy, not the tool contract.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]

from phloem.tools.errors import ToolFailure
from phloem.tools.fsroot import Tree
from phloem.tools.outputlimit import OutputPolicy
from phloem.tools.workspace import shown

MAX_GREP_FILE_BYTES = 10 * 1024 * 1024
MAX_GREP_LINE_BYTES = 1024 * 1024
DEFAULT_MAX_RESULTS = 200
MAX_RESULTS_LIMIT = 10_000
MAX_CONTEXT_LINES = 100
MAX_PATTERN_CHARS = 4096
NUL_SCAN_BYTES = 8000
MAX_REGEX_MEMORY = 64 * 1024 * 1024
"""Memory RE2 may use for one compiled pattern; a larger one is an `arguments` error."""
FIRST_READ_BYTES = 64 * 1024
"""Most files fit in one read of this size, which spares a stat call."""


def compile_pattern(pattern: str, literal: bool, case_insensitive: bool) -> Any:
    """An RE2 program for `pattern` (linear-time matching, Go/RE2 syntax), with `^` and `$`
    at line boundaries and no match ever crossing a newline."""
    options = re2.Options()
    options.log_errors = False
    options.never_nl = True
    options.case_sensitive = not case_insensitive
    options.max_mem = MAX_REGEX_MEMORY
    if literal:
        options.literal = True
        source = pattern
    else:
        source = "(?m)" + pattern
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        raise ToolFailure(
            "arguments", f"pattern is not a valid RE2 regular expression: {detail}"
        ) from None


class _Searcher:
    """Finds matching lines of one file's bytes."""

    def __init__(self, regex: Any, context: int, line_policy: OutputPolicy) -> None:
        self.regex = regex
        self.context = context
        self.line_policy = line_policy
        self.skipped_long_lines = 0

    def _show(self, raw: bytes) -> str:
        line = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
        if self.line_policy.max_line_bytes and len(raw) > self.line_policy.max_line_bytes:
            line, _ = self.line_policy.apply(line)
        return line

    def _context(self, data: bytes, start: int, end: int, before: bool) -> list[str] | None:
        """Up to `context` whole lines before `start` or after `end` (None when none)."""
        lines: list[str] = []
        if before:
            cursor = start
            while len(lines) < self.context and cursor > 0:
                previous = data.rfind(b"\n", 0, cursor - 1) + 1
                lines.append(self._show(data[previous : cursor - 1]))
                cursor = previous
            lines.reverse()
        else:
            cursor = end
            while len(lines) < self.context and cursor < len(data):
                following = data.find(b"\n", cursor)
                stop = len(data) if following < 0 else following
                lines.append(self._show(data[cursor:stop]))
                cursor = stop + 1
        return lines or None

    def search(self, path: str, data: bytes, room: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        position = 0
        line_number = 1
        counted_to = 0
        size = len(data)
        while len(found) < room and position <= size:
            hit = self.regex.search(data, position)
            if hit is None:
                break
            at = hit.start()
            if at == size and (not data or data[-1] == 0x0A):
                break  # an empty match after the final newline is not a line
            start = data.rfind(b"\n", 0, at) + 1
            newline = data.find(b"\n", at)
            end = size if newline < 0 else newline
            line_number += data.count(b"\n", counted_to, start)
            counted_to = start
            if end - start > MAX_GREP_LINE_BYTES:
                self.skipped_long_lines += 1
            else:
                context = bool(self.context)
                found.append(
                    {
                        "path": path,
                        "line": line_number,
                        "text": self._show(data[start:end]),
                        "before": self._context(data, start, end + 1, True) if context else None,
                        "after": self._context(data, start, end + 1, False) if context else None,
                    }
                )
            position = end + 1
        return found


@dataclass(frozen=True)
class Job:
    """What every shard needs to search its files (pickled to shard children)."""

    root: str
    pattern: str
    literal: bool
    case_insensitive: bool
    context: int
    policy: OutputPolicy
    needle: bytes | None
    room: int  # matches worth finding: the cap + 1, so that truncation shows


@dataclass
class Found:
    """What searching some files found."""

    matches: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    skipped_binary: int = 0
    skipped_large: int = 0
    skipped_long_lines: int = 0

    def add(self, other: Found) -> None:
        self.matches.extend(other.matches)
        self.truncated = self.truncated or other.truncated
        self.skipped_binary += other.skipped_binary
        self.skipped_large += other.skipped_large
        self.skipped_long_lines += other.skipped_long_lines


def search_files(job: Job, paths: list[str], cancel: Callable[[], None]) -> Found:
    """Search `paths` (sorted) in order until `job.room` matches are found; `cancel` is
    called every 64 files (it raises to abort)."""
    regex = compile_pattern(job.pattern, job.literal, job.case_insensitive)
    searcher = _Searcher(regex, job.context, job.policy)
    found = Found()
    with Tree(job.root) as tree:
        for index, path in enumerate(paths):
            if index % 64 == 0:
                cancel()
            data = load_file(tree, path)
            if data is None:
                found.skipped_large += 1
                continue
            if data.find(b"\x00", 0, NUL_SCAN_BYTES) >= 0:
                found.skipped_binary += 1
                continue
            if job.needle is not None and data.find(job.needle) < 0:
                continue
            found.matches.extend(searcher.search(shown(path), data, job.room - len(found.matches)))
            if len(found.matches) >= job.room:
                found.truncated = True
                break
    found.skipped_long_lines = searcher.skipped_long_lines
    return found


def search_shard(arg: tuple[Job, list[str]]) -> dict[str, Any]:
    """A shard child's work (run by `call_in_child`): its files' `Found` as plain data."""
    found = search_files(arg[0], arg[1], lambda: None)
    return {
        "matches": found.matches,
        "truncated": found.truncated,
        "counts": [found.skipped_binary, found.skipped_large, found.skipped_long_lines],
    }


def load_file(tree: Tree, path: str) -> bytes | None:
    """The bytes of workspace file `path` (empty if unreadable), or None for a file over
    the size limit. Opened through its parent directory's descriptor, reached from the root
    without following any symlink (`Tree`), so a directory swapped for a symlink since the
    walk cannot lead out of the root."""
    try:
        descriptor = tree.open_file(path)
    except OSError:
        return b""
    try:
        data = os.read(descriptor, FIRST_READ_BYTES)
        if len(data) == FIRST_READ_BYTES:  # a larger file: size it, then read the rest
            size = os.fstat(descriptor).st_size
            if size > MAX_GREP_FILE_BYTES:
                return None
            chunks = [data]
            total = len(data)
            while total <= MAX_GREP_FILE_BYTES:
                chunk = os.read(descriptor, max(size + 1 - total, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            data = b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(descriptor)
    return None if len(data) > MAX_GREP_FILE_BYTES else data
