"""The `write` tool: create or replace a file atomically, with a diff of the change."""

from __future__ import annotations

from phloem.protocols.limits import check_range
from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.diff import unified_diff
from phloem.tools.errors import ToolFailure
from phloem.tools.fileio import MAX_WRITE_BYTES, read_regular


class WriteTool(Tool):
    name = "write"
    description = (
        "Create or overwrite a file in the workspace with `content`. An existing file must "
        "have been read in this session and be unchanged since. Parent directories are "
        "created. Returns a unified diff of the change."
    )
    input_schema = object_schema(
        {
            "path": {"type": "string", "description": "Workspace-relative file path."},
            "content": {"type": "string", "description": "The complete new file content."},
        },
        ["path", "content"],
    )

    def __init__(self, max_write_bytes: int = MAX_WRITE_BYTES) -> None:
        self.max_write_bytes = check_range("max_write_bytes", max_write_bytes, 1, 1 << 30)

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        data = args["content"].encode()
        if len(data) > self.max_write_bytes:
            raise ToolFailure(
                "too_large", f"content is {len(data)} bytes; the limit is {self.max_write_bytes}"
            )
        workspace = ctx.workspace
        with workspace.mutation_lock:
            ctx.check_cancelled()
            resolved = workspace.resolve(args["path"], must_exist=False)
            target = resolved.absolute
            old = b""
            if target.exists() or target.is_symlink():
                old = read_regular(
                    target,
                    self.max_write_bytes * 2,
                    resolved.relative,
                    workspace.holds_descriptor,
                )
                workspace.verify(ctx.session, resolved.relative, old)
            workspace.make_parents(target)
            ctx.check_cancelled()
            workspace.atomic_write(target, data)
            workspace.record(ctx.session, resolved.relative, data)
        ctx.touch("write", resolved.relative)
        diff = unified_diff(old.decode(errors="replace"), args["content"], resolved.relative)
        shown, report = ctx.limit(diff)
        return {
            "path": resolved.relative,
            "bytes_written": len(data),
            "diff": shown,
            "truncated": report.truncated,
            "report": report.to_dict(),
        }
