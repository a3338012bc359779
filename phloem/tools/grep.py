"""The `grep` tool: search workspace files for a regex or a literal, line by line.

Files are walked honouring gitignore, skipping hidden and VCS directories; the matches
come sorted by path then line. Files over 10 MiB and binary files (NUL in the first
8000 bytes) are skipped and counted, as are matching lines over 1 MiB. Patterns use RE2
syntax (Go's, as plasmid's): matching takes linear time, so no pattern can hang the call;
a match never spans lines.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from typing import Any

import re2  # type: ignore[import-untyped]

from phloem.tools.contract import JSON, Tool, ToolContext, ToolWarning, object_schema
from phloem.tools.errors import ToolFailure
from phloem.tools.ignorerules import PathGlob, split_glob_list
from phloem.tools.outputlimit import OutputPolicy
from phloem.tools.walk import Entry, Tree, WalkFilter, WalkResult, WalkWarning, walk
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

    def search(self, path: str, data: bytes, room: int) -> list[JSON]:
        found: list[JSON] = []
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


class GrepTool(Tool):
    name = "grep"
    description = (
        "Search file contents in the workspace for a regular expression (or a literal "
        "string). Honours .gitignore and skips hidden, VCS, binary and very large files. "
        "Returns matching lines sorted by path and line, with optional context lines."
    )
    input_schema = object_schema(
        {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Regular expression, or literal text when `literal` is set.",
            },
            "path": {
                "type": "string",
                "default": ".",
                "description": "Workspace-relative file or directory to search.",
            },
            "glob": {
                "type": "string",
                "description": "Only files matching these gitignore-style globs "
                "(comma-separated, `!` excludes).",
            },
            "literal": {"type": "boolean", "default": False},
            "case_insensitive": {"type": "boolean", "default": False},
            "context_lines": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_CONTEXT_LINES,
                "default": 0,
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS_LIMIT,
                "default": DEFAULT_MAX_RESULTS,
            },
        },
        ["pattern"],
    )
    read_only = True

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        regex = compile_pattern(args["pattern"], args["literal"], args["case_insensitive"])
        # Text every match must contain (the literal itself, or the longest run of plain
        # characters the regex requires) is looked for in the raw bytes first, a C-speed
        # scan; only files holding it are decoded and searched line by line.
        needle = None
        if not args["case_insensitive"]:
            text = args["pattern"] if args["literal"] else _required_literal(args["pattern"])
            if text and "\ufffd" not in text:
                needle = text.encode()
        glob = PathGlob(split_glob_list(args["glob"])) if args.get("glob") else None
        if glob is not None and glob.errors:
            raise ToolFailure("arguments", f"glob is malformed: {glob.errors[0].text}")
        resolved = ctx.workspace.resolve(args["path"])
        walked = WalkResult()
        if resolved.absolute.is_dir():
            flt = WalkFilter(respect_gitignore=True, yield_dirs=False)
            root = str(ctx.workspace.root)
            entries = walk(root, resolved.relative, flt, walked, ctx.cancel, _warner(ctx))
            files = [entry for entry in entries if entry.type == "file"]
        else:
            files = [Entry(resolved.relative, "file", 0)]
        if glob is not None:
            base = "" if resolved.relative == "." else resolved.relative + "/"
            files = [f for f in files if glob.matches(f.path.removeprefix(base))]
        files.sort(key=lambda entry: entry.path)
        searcher = _Searcher(regex, args["context_lines"], ctx.policy)
        cap = args["max_results"]
        matches: list[JSON] = []
        skipped_binary = skipped_large = 0
        truncated = walked.truncated
        with Tree(str(ctx.workspace.root)) as tree:
            for index, entry in enumerate(files):
                if index % 64 == 0:
                    ctx.check_cancelled()
                data = _load(tree, entry.path)
                if data is None:
                    skipped_large += 1
                    continue
                if data.find(b"\x00", 0, NUL_SCAN_BYTES) >= 0:
                    skipped_binary += 1
                    continue
                if needle is not None and data.find(needle) < 0:
                    continue
                found = searcher.search(shown(entry.path), data, cap - len(matches) + 1)
                matches.extend(found)
                if len(matches) > cap:
                    del matches[cap:]
                    truncated = True
                    break
        paths: list[str] = []
        for match in matches:
            if not paths or paths[-1] != match["path"]:
                paths.append(match["path"])
        for path in paths:
            ctx.touch("search", path)
        result: dict[str, Any] = {
            "matches": matches,
            "match_count": len(matches),
            "files": len(paths),
            "truncated": truncated,
            "skipped_binary": skipped_binary,
            "skipped_too_large": skipped_large,
            "skipped_long_lines": searcher.skipped_long_lines,
        }
        bounded = ctx.bound_list(result, "matches")
        if bounded["truncated"] and len(bounded["matches"]) < len(matches):
            kept = bounded["matches"]
            bounded["match_count"] = len(kept)
            bounded["files"] = len({match["path"] for match in kept})
        return bounded


_PARSE_DIVERGENCES = ("[:", "[[", "--", "&&", "~~", "||")
"""Where Python's parser reads a pattern unlike RE2 (`[[:alpha:]]` is a POSIX class to RE2,
"[:alph" then "]" to Python) or warns about a future change: no prefilter then."""


def _required_literal(source: str) -> str:
    """The longest run of literal characters every match of `source` contains ("" when
    none is certain). Reads CPython's regex parse tree (the common syntax of Python and
    RE2); a pattern it cannot read, or any surprise, gives ""."""
    if any(mark in source for mark in _PARSE_DIVERGENCES):
        return ""
    try:
        parser: Any = importlib.import_module("re._parser")
        constants: Any = importlib.import_module("re._constants")
        parsed = parser.parse(source, re.MULTILINE)
        if parsed.state.flags & re.IGNORECASE:
            return ""
        best = ""

        def scan(items: Any) -> None:
            nonlocal best
            run: list[str] = []
            for op, value in items:
                if op is constants.LITERAL:
                    run.append(chr(value))
                    continue
                best = max(best, "".join(run), key=len)
                run = []
                if op is constants.SUBPATTERN and not value[1] and not value[2]:
                    scan(value[3].data)
            best = max(best, "".join(run), key=len)

        scan(parsed.data)
    except Exception:
        return ""
    return best


def _warner(ctx: ToolContext) -> Callable[[WalkWarning], None]:
    """Pass walk warnings (a malformed .gitignore rule) on to the context."""

    def warn(warning: WalkWarning) -> None:
        ctx.warn(ToolWarning(warning.code, warning.path, warning.line, warning.message))

    return warn


def _load(tree: Tree, path: str) -> bytes | None:
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
