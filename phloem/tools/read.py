"""The `read` tool: a numbered window of a UTF-8 text file, recorded in the read ledger."""

from __future__ import annotations

from phloem.protocols.limits import check_range
from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.errors import ToolFailure
from phloem.tools.fileio import MAX_READ_BYTES, is_binary, read_regular

DEFAULT_READ_LIMIT = 2000
MAX_READ_LINE_LIMIT = 1_000_000


def render_window(text: str, offset: int, limit: int) -> tuple[str, int, int, int]:
    """Render lines offset..offset+limit-1 as `%6d<TAB>body` (CR stripped), each keeping a
    newline when its source line had one; return (content, start, end, total lines)."""
    pieces = text.split("\n")
    terminated = len(pieces) - 1
    total = terminated if pieces[-1] == "" else terminated + 1
    if total == 0 or offset > total:
        return "", 0, 0, total
    end = min(offset - 1 + limit, total)
    out = []
    for number in range(offset, end + 1):
        body = pieces[number - 1]
        if number <= terminated and body.endswith("\r"):
            body = body[:-1]
        newline = "\n" if number <= terminated else ""
        out.append(f"{number:6d}\t{body}{newline}")
    return "".join(out), offset, end, total


class ReadTool(Tool):
    name = "read"
    description = (
        "Read a UTF-8 text file in the workspace. Returns numbered lines "
        "(`%6d<TAB>text`) from `offset` (1-based) for at most `limit` lines, with the total "
        "line count. Reading a file is required before write or edit may change it."
    )
    input_schema = object_schema(
        {
            "path": {"type": "string", "description": "Workspace-relative file path."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "First line to return (1-based).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_READ_LINE_LIMIT,
                "default": DEFAULT_READ_LIMIT,
                "description": "Most lines to return.",
            },
        },
        ["path"],
    )
    read_only = True

    def __init__(self, max_read_bytes: int = MAX_READ_BYTES) -> None:
        self.max_read_bytes = check_range("max_read_bytes", max_read_bytes, 1, 1 << 30)

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        resolved = ctx.workspace.resolve(args["path"])
        data = read_regular(
            resolved.absolute,
            self.max_read_bytes,
            resolved.relative,
            ctx.workspace.holds_descriptor,
        )
        ctx.check_cancelled()
        if is_binary(data):
            raise ToolFailure("binary", f"{resolved.relative} is not UTF-8 text")
        rendered, start, end, total = render_window(data.decode(), args["offset"], args["limit"])
        content, report = ctx.limit(rendered)
        ctx.check_cancelled()
        ctx.workspace.record(ctx.session, resolved.relative, data)
        ctx.touch("read", resolved.relative)
        return {
            "path": resolved.relative,
            "content": content,
            "start_line": start,
            "end_line": end,
            "total_lines": total,
            "truncated": report.truncated or (0 < end < total),
            "report": report.to_dict(),
        }
