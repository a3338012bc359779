"""The `ls` tool: a directory listing to a depth, directories first, then by path."""

from __future__ import annotations

import os
import time

from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.fsroot import Tree
from phloem.tools.walk import WalkFilter, WalkResult, walk
from phloem.tools.workspace import shown

DEFAULT_MAX_RESULTS = 20_000
MAX_DEPTH_LIMIT = 64


def rfc3339(timestamp: float) -> str:
    """UTC time with second precision: 2026-01-02T03:04:05Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


class LsTool(Tool):
    name = "ls"
    description = (
        "List a workspace directory to `max_depth` levels: each entry's path, type "
        "(file, dir, symlink, other), size and modification time (RFC 3339, UTC). "
        "Directories first, then by path. Hidden entries only with show_hidden."
    )
    input_schema = object_schema(
        {
            "path": {"type": "string", "default": ".", "description": "Directory to list."},
            "max_depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_DEPTH_LIMIT,
                "default": 1,
            },
            "show_hidden": {"type": "boolean", "default": False},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": DEFAULT_MAX_RESULTS,
                "default": DEFAULT_MAX_RESULTS,
            },
        },
        [],
    )
    read_only = True

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        resolved = ctx.workspace.resolve(args["path"])
        hidden = args["show_hidden"]
        entries: list[JSON] = []
        walked = WalkResult()
        root = str(ctx.workspace.root)
        listed: list[tuple[str, str, os.stat_result | None]]
        if resolved.absolute.is_dir():
            flt = WalkFilter(
                skip_hidden=not hidden,
                skip_vcs=not hidden,
                max_depth=args["max_depth"],
                max_results=args["max_results"],
                with_stat=True,
            )
            listed = [
                (e.path, e.type, e.info)
                for e in walk(root, resolved.relative, flt, walked, ctx.cancel)
            ]
        else:
            with Tree(root) as tree:
                try:
                    listed = [(resolved.relative, "file", tree.lstat(resolved.relative))]
                except OSError:
                    listed = []
        for path, kind, info in listed:
            if info is None:
                continue
            entries.append(
                {
                    "path": shown(path),
                    "type": kind,
                    "size": info.st_size,
                    "mod_time": rfc3339(info.st_mtime),
                }
            )
        entries.sort(key=lambda entry: (entry["type"] != "dir", entry["path"]))
        ctx.touch("list", resolved.relative)
        return ctx.bound_list({"entries": entries, "truncated": walked.truncated}, "entries")
