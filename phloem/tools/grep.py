"""The `grep` tool: search workspace files for a regex or a literal, line by line.

Files are walked honouring gitignore, skipping hidden and VCS directories; the matches
come sorted by path then line. Files over 10 MiB and binary files (NUL in the first
8000 bytes) are skipped and counted, as are matching lines over 1 MiB. Patterns use RE2
syntax (Go's, as plasmid's): matching takes linear time, so no pattern can hang the call;
a match never spans lines.

Speed: a search of 2 x `SHARD_MIN_FILES` files or more is split into contiguous shards of the
sorted file list; the calling thread searches the first while process children of the
fork server (`start_call`, one per other core, up to `MAX_SHARD_CHILDREN`) search the
others, and the results are joined in order, so the matches are the ones one thread finds
(when the result is truncated, the skipped-file counts may include files past the point
where one thread would have stopped).
Threads would not help: matching and `bytes.find` hold the GIL. A shard whose child
fails or takes longer than `SHARD_TIMEOUT_S` is searched by the caller instead.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from typing import Any

from phloem.supervision.childcall import CallControl, PendingCall, start_call
from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.errors import ToolFailure
from phloem.tools.grepsearch import (
    Found,
    Job,
    compile_pattern,
    search_files,
    search_shard,
)
from phloem.tools.ignorerules import PathGlob, split_glob_list
from phloem.tools.walk import Entry, WalkFilter, WalkResult, WalkWarning, walk

DEFAULT_MAX_RESULTS = 200
MAX_RESULTS_LIMIT = 10_000
MAX_CONTEXT_LINES = 100
MAX_PATTERN_CHARS = 4096
SHARD_MIN_FILES = 4_000
"""Each shard has at least this many files, and fewer than twice as many are searched in
the calling thread only: a shard child costs ~45 ms (start from the fork server, import of
`grepsearch`, the file list pickled), about what one thread needs for 2,000 files."""
MAX_SHARD_CHILDREN = 7
"""Process children one search may use besides the calling thread (at most cores - 1)."""
SHARD_TIMEOUT_S = 600.0
"""How long a shard child may take; past it (or if it fails) the caller searches that
shard itself, so a child never changes the answer, only how fast it comes."""


def _shard_count(files: int) -> int:
    if files < SHARD_MIN_FILES:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min((cores or 1) - 1, MAX_SHARD_CHILDREN, files // SHARD_MIN_FILES - 1) + 1)


def _search_sharded(job: Job, paths: list[str], ctx: ToolContext) -> Found:
    """Search `paths` in contiguous shards: the first in this thread, each other one in a
    process child of the fork server, all at once (both cores busy, not just one: the
    GIL keeps threads from searching in parallel). Results are merged in path order; a
    shard whose child fails is searched here instead."""
    shards = _shard_count(len(paths))
    if shards == 1:
        return search_files(job, paths, ctx.check_cancelled)
    size = -(-len(paths) // shards)
    parts = [paths[i : i + size] for i in range(0, len(paths), size)]
    controls = [CallControl() for _ in parts[1:]]
    pending: list[PendingCall | None] = []
    try:
        for index, control in enumerate(controls, start=1):
            try:  # started before this thread searches: nothing competes for the GIL
                pending.append(
                    start_call(
                        search_shard,
                        (job, parts[index]),
                        name=f"grep-shard-{index}",
                        timeout=SHARD_TIMEOUT_S,
                        control=control,
                    )
                )
            except Exception:  # searched here instead (see `SHARD_TIMEOUT_S`)
                pending.append(None)
        found = search_files(job, parts[0], ctx.check_cancelled)
        for index, call in enumerate(pending, start=1):
            if len(found.matches) >= job.room:
                break  # enough already: later shards cannot come first
            answer = _answer(call)
            if answer is None:
                found.add(search_files(job, parts[index], ctx.check_cancelled))
                continue
            binary, large, long_lines = answer["counts"]
            found.add(Found(answer["matches"], answer["truncated"], binary, large, long_lines))
    finally:
        for control in controls:
            control.cancel()
    return found


def _answer(call: PendingCall | None) -> dict[str, Any] | None:
    if call is None:
        return None
    try:
        return dict(call.result())
    except Exception:  # the child failed or timed out: its shard is searched here
        return None


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
        compile_pattern(args["pattern"], args["literal"], args["case_insensitive"])  # valid?
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
        job = Job(
            str(ctx.workspace.root),
            args["pattern"],
            args["literal"],
            args["case_insensitive"],
            args["context_lines"],
            ctx.policy,
            needle,
            args["max_results"] + 1,
        )
        found = _search_sharded(job, [entry.path for entry in files], ctx)
        cap = args["max_results"]
        matches = found.matches
        truncated = walked.truncated or found.truncated
        if len(matches) > cap:
            del matches[cap:]
            truncated = True
        skipped_binary, skipped_large = found.skipped_binary, found.skipped_large
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
            "skipped_long_lines": found.skipped_long_lines,
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
        ctx.warn(warning)

    return warn
