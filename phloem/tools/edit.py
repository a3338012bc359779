"""The `edit` tool: replace text in a file that was read, keeping its layout."""

from __future__ import annotations

from phloem.protocols.limits import check_range
from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.diff import unified_diff
from phloem.tools.errors import ToolFailure
from phloem.tools.fileio import MAX_WRITE_BYTES, is_binary, read_regular
from phloem.tools.textmatch import apply_edit, logical


class EditTool(Tool):
    name = "edit"
    description = (
        "Replace `old_text` with `new_text` in a workspace file read in this session. "
        "Matching tries the exact text, then ignores trailing whitespace, then allows one "
        "uniform indentation change. Several matches fail unless `replace_all` is set. "
        "Keeps the BOM, line endings and final newline. Returns a unified diff of the "
        "logical lines (no BOM, CRLF shown as LF)."
    )
    input_schema = object_schema(
        {
            "path": {"type": "string", "description": "Workspace-relative file path."},
            "old_text": {"type": "string", "description": "Text to find."},
            "new_text": {"type": "string", "description": "Replacement text."},
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every match instead of requiring exactly one.",
            },
        },
        ["path", "old_text", "new_text"],
    )

    def __init__(self, max_file_bytes: int = MAX_WRITE_BYTES) -> None:
        self.max_file_bytes = check_range("max_file_bytes", max_file_bytes, 1, 1 << 30)

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        if args["old_text"] == "":
            raise ToolFailure("empty_old_text", "old_text must not be empty")
        workspace = ctx.workspace
        with workspace.mutation_lock:
            ctx.check_cancelled()
            resolved = workspace.resolve(args["path"])
            data = read_regular(
                resolved.absolute,
                self.max_file_bytes,
                resolved.relative,
                workspace.holds_descriptor,
            )
            workspace.verify(ctx.session, resolved.relative, data)
            if is_binary(data):
                raise ToolFailure("binary", f"{resolved.relative} is not UTF-8 text")
            original = data.decode()
            outcome = apply_edit(original, args["old_text"], args["new_text"], args["replace_all"])
            encoded = outcome.text.encode()
            if len(encoded) > self.max_file_bytes:
                raise ToolFailure(
                    "too_large", f"the edited file would exceed {self.max_file_bytes} bytes"
                )
            ctx.check_cancelled()
            workspace.atomic_write(resolved.absolute, encoded)
            workspace.record(ctx.session, resolved.relative, encoded)
        ctx.touch("edit", resolved.relative)
        diff = unified_diff(logical(original), logical(outcome.text), resolved.relative)
        shown, report = ctx.limit(diff)
        return {
            "path": resolved.relative,
            "replacements": outcome.replacements,
            "match_tier": outcome.tier,
            "diff": shown,
            "truncated": report.truncated,
            "report": report.to_dict(),
        }
