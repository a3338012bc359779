"""Instruction documents: reading one file within its cap, and its `@path` imports.

`read_text(path, cap)` reads a regular UTF-8 file, at most `cap` bytes of it (the rest is
cut at a character boundary and reported). `Importer` expands Claude-style `@path`
imports in a document's text: the token is replaced by the imported file's text,
recursively, at most `max_depth` levels deep (a deeper one stays unexpanded, with a
warning), never outside the allowed roots (a workspace file may not import from the home
directory unless it is configured as an import root), and never in a cycle. Imports in
fenced code blocks and inline code spans are left alone, as are e-mail addresses.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from phloem.instructions.policy import ToolPolicy
from phloem.protocols.files import UnreadableFile, read_prefix
from phloem.tools.ignorerules import PathGlob

__all__ = ["Document", "Importer", "ReadResult", "read_text", "within"]

MAX_IMPORTS_PER_DOCUMENT = 64

_IMPORT = re.compile(r"(?<![\w@`/.])@((?:~|\.{1,2})?/?[A-Za-z0-9_.~\-][A-Za-z0-9_.~\-/]*)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")

Warn = Callable[..., None]


@dataclass(frozen=True)
class ReadResult:
    text: str
    digest: str
    truncated: bool
    size: int


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def read_text(path: str, cap: int) -> ReadResult | str:
    """The file's text (cut to `cap` bytes), or a reason it cannot be read."""
    try:
        data, size = read_prefix(path, cap)
    except UnreadableFile as exc:
        return str(exc)
    truncated = len(data) > cap
    try:
        text = data[:cap].decode("utf-8", "ignore") if truncated else data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    if "\x00" in text:
        return "binary (holds NUL)"
    digest = hashlib.sha256(data[:cap] if truncated else data).hexdigest()
    return ReadResult(text, digest, truncated, max(size, len(data)))


@dataclass(frozen=True)
class Document:
    """One instruction document as the model will see it.

    `shown` is how it is named (`~/.claude/CLAUDE.md`, `src/AGENTS.md`, an absolute path
    for ancestors); `scope` is `user`, `ancestor`, `root`, `rule` or `nested`; `rank`
    orders documents least specific first.
    """

    shown: str
    real: str
    scope: str
    rank: tuple[int, int, str]
    text: str
    digest: str
    policy: ToolPolicy | None = None
    globs: PathGlob | None = None

    def render(self) -> str:
        return f"Instructions from {self.shown} ({self.scope}):\n\n{self.text.strip()}\n"


class Importer:
    """Expands `@path` imports (see the module docstring)."""

    def __init__(self, home: str, max_depth: int, cap: int, warn: Warn) -> None:
        self.home = home
        self.max_depth = max_depth
        self.cap = cap
        self.warn = warn

    def expand(self, text: str, real: str, shown: str, roots: Sequence[str]) -> str:
        return self._expand(text, real, shown, [os.path.realpath(r) for r in roots], [real], 1)

    def _expand(
        self, text: str, real: str, shown: str, roots: list[str], stack: list[str], depth: int
    ) -> str:
        if "@" not in text:
            return text
        out: list[str] = []
        fenced = False
        count = 0
        for number, line in enumerate(text.splitlines(keepends=True), start=1):
            if _FENCE.match(line):
                fenced = not fenced
            if fenced or "@" not in line:
                out.append(line)
                continue
            spans = [m.span() for m in _CODE_SPAN.finditer(line)]
            pieces: list[str] = []
            last = 0
            for match in _IMPORT.finditer(line):
                start, end = match.span()
                if any(a <= start < b for a, b in spans):
                    continue
                token = match.group(1).rstrip(".,;:)]!?")
                end = start + 1 + len(token)
                count += 1
                if count > MAX_IMPORTS_PER_DOCUMENT:
                    self.warn(
                        "instructions_import_limit",
                        f"more than {MAX_IMPORTS_PER_DOCUMENT} imports; the rest are left as text",
                        path=shown,
                        line=number,
                    )
                    break
                replacement = self._one(token, real, shown, roots, stack, depth, number)
                if replacement is None:
                    continue
                pieces.append(line[last:start])
                pieces.append(replacement)
                last = end
            pieces.append(line[last:])
            out.append("".join(pieces))
        return "".join(out)

    def _one(
        self,
        token: str,
        real: str,
        shown: str,
        roots: list[str],
        stack: list[str],
        depth: int,
        line: int,
    ) -> str | None:
        """The imported text for `@token`, or None to leave the token as it is."""
        if token.startswith("~/"):
            target = os.path.join(self.home, token[2:])
        elif token.startswith("/"):
            target = token
        else:
            target = os.path.join(os.path.dirname(real), token)
        if "/" not in token and "." not in token:
            return None  # `@someone`: a mention, not a path
        target = os.path.realpath(target)
        if not any(within(target, root) for root in roots):
            self.warn(
                "instructions_import_outside",
                f"@{token} is outside the roots this file may import from; not imported",
                path=shown,
                line=line,
            )
            return None
        if target in stack:
            self.warn(
                "instructions_import_cycle",
                f"@{token} imports a file already being imported (a cycle); not imported",
                path=shown,
                line=line,
            )
            return None
        if depth > self.max_depth:
            self.warn(
                "instructions_import_depth",
                f"@{token} is nested deeper than max_import_depth ({self.max_depth}); dropped",
                path=shown,
                line=line,
            )
            return ""
        read = read_text(target, self.cap)
        if isinstance(read, str):
            self.warn(
                "instructions_import_unreadable",
                f"@{token}: {read}; not imported",
                path=shown,
                line=line,
            )
            return None
        if read.truncated:
            self.warn(
                "instructions_file_truncated",
                f"@{token} is {read.size} bytes; only the first {self.cap} are used",
                path=shown,
                line=line,
            )
        return self._expand(read.text, target, token, roots, [*stack, target], depth + 1)
