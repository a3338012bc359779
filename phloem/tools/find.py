"""The `find` tool: workspace paths matching a glob (no gitignore; hidden and VCS skipped)."""

from __future__ import annotations

from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.errors import ToolFailure
from phloem.tools.ignorerules import PathGlob, split_glob_list
from phloem.tools.walk import WalkFilter, WalkResult, walk
from phloem.tools.workspace import shown

DEFAULT_MAX_RESULTS = 200
MAX_RESULTS_LIMIT = 20_000


class FindTool(Tool):
    name = "find"
    description = (
        "Find workspace paths whose path (relative to `path`) matches a gitignore-style "
        "glob such as `*.py` or `src/**/test_*.py`. Skips hidden and VCS directories; "
        "does not apply .gitignore. Sorted by path, or newest first with sort_by=modified."
    )
    input_schema = object_schema(
        {
            "glob": {
                "type": "string",
                "minLength": 1,
                "description": "Gitignore-style glob(s), comma-separated; `!` excludes.",
            },
            "path": {"type": "string", "default": ".", "description": "Directory to search."},
            "type": {
                "type": "string",
                "enum": ["any", "file", "dir", "symlink"],
                "default": "any",
            },
            "sort_by": {"type": "string", "enum": ["path", "modified"], "default": "path"},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS_LIMIT,
                "default": DEFAULT_MAX_RESULTS,
            },
        },
        ["glob"],
    )
    read_only = True

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        glob = PathGlob(split_glob_list(args["glob"]))
        if glob.errors or not glob.patterns:
            raise ToolFailure("arguments", "glob is malformed")
        resolved = ctx.workspace.resolve(args["path"])
        if not resolved.absolute.is_dir():
            raise ToolFailure("arguments", f"path must be a directory: {resolved.relative}")
        walked = WalkResult()
        base = "" if resolved.relative == "." else resolved.relative + "/"
        wanted = args["type"]
        found: list[tuple[float, str]] = []
        flt = WalkFilter(with_stat=args["sort_by"] == "modified")
        for entry in walk(str(ctx.workspace.root), resolved.relative, flt, walked, ctx.cancel):
            if wanted not in ("any", entry.type):
                continue
            if not glob.matches(entry.path.removeprefix(base), entry.type == "dir"):
                continue
            found.append((entry.info.st_mtime if entry.info else 0.0, entry.path))
        if args["sort_by"] == "modified":
            found.sort(key=lambda item: (-item[0], item[1]))
        else:
            found.sort(key=lambda item: item[1])
        cap = args["max_results"]
        paths = [shown(path) for _, path in found[:cap]]
        for path in paths:
            ctx.touch("find", path)
        result: JSON = {"paths": paths, "truncated": walked.truncated or len(found) > cap}
        return ctx.bound_list(result, "paths")
