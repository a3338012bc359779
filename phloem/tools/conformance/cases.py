"""Case runners for the plasmid-v1 fixture layout, one function per (area, kind).

A runner gets the case directory and the decoded `case.json` and returns the actual JSON
value to compare with `expected.json`, and the warnings it emitted (or None when the kind
never warns). Each runs against a fresh temporary workspace.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phloem.tools.contract import ToolContext, is_failure
from phloem.tools.diff import unified_diff
from phloem.tools.edit import EditTool
from phloem.tools.find import FindTool
from phloem.tools.grep import GrepTool
from phloem.tools.ignorerules import PathGlob, split_glob_list
from phloem.tools.ls import LsTool
from phloem.tools.outputlimit import (
    DEFAULT_SESSION_BUDGET,
    OutputBudget,
    OutputPolicy,
    logical_lines,
    marker,
)
from phloem.tools.read import ReadTool
from phloem.tools.walk import WalkFilter, WalkResult, walk
from phloem.tools.workspace import TEMP_PREFIX, Touch, Workspace
from phloem.tools.write import WriteTool

JSON = Any
Warnings = list[dict[str, Any]] | None
Runner = Callable[[Path, dict[str, Any], Path], tuple[JSON, Warnings]]
"""(case directory, case.json, scratch directory) -> (actual value, warnings)."""

RUNNERS: dict[tuple[str, str], Runner] = {}


def register_runner(area: str, kind: str, runner: Runner) -> None:
    """Add (or replace) the runner for one (area, kind); later features plug in here."""
    RUNNERS[(area, kind)] = runner


def _input(case_dir: Path) -> Any:
    """input.json, or {} for a case that brings an `input/` tree instead."""
    path = case_dir / "input.json"
    if not path.is_file() and (case_dir / "input").is_dir():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _seed(root: Path, files: dict[str, str], case_dir: Path | None = None) -> None:
    """Create the case's files: an `input/` tree (copied as is), then the `files` map."""
    tree = case_dir / "input" if case_dir is not None else None
    if tree is not None and tree.is_dir():
        shutil.copytree(tree, root, symlinks=True, dirs_exist_ok=True)
    for relative, content in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode())


def _policy(raw: dict[str, Any] | None) -> OutputPolicy:
    if not raw or all(not raw.get(k) for k in ("max_bytes", "max_lines", "max_line_bytes")):
        return OutputPolicy()
    return OutputPolicy(
        max_bytes=int(raw.get("max_bytes", 0)),
        max_lines=int(raw.get("max_lines", 0)),
        max_line_bytes=int(raw.get("max_line_bytes", 0)),
        head_fraction=float(raw.get("head_fraction", 0.0)),
    )


class _Recorder:
    def __init__(self) -> None:
        self.touches: list[Touch] = []

    def __call__(self, touch: Touch) -> None:
        self.touches.append(touch)


def _context(
    root: Path, session: str, budget: int, policy: OutputPolicy
) -> tuple[ToolContext, _Recorder]:
    recorder = _Recorder()
    ctx = ToolContext(
        workspace=Workspace(root),
        session=session or "fixture",
        policy=policy,
        budget=OutputBudget(budget or DEFAULT_SESSION_BUDGET),
        on_touch=recorder,
    )
    return ctx, recorder


# -- outputlimit and pathglob ----------------------------------------------------------


def _outputlimit_apply(
    case_dir: Path, case: dict[str, Any], scratch: Path
) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    raw = data["policy"]
    policy = OutputPolicy(
        max_bytes=int(raw.get("max_bytes", 0)),
        max_lines=int(raw.get("max_lines", 0)),
        max_line_bytes=int(raw.get("max_line_bytes", 0)),
        head_fraction=float(raw.get("head_fraction", 0.0)),
    )
    output, report = policy.apply(data["input"])
    return {"output": output, "report": report.to_dict()}, None


def _outputlimit_lines(
    case_dir: Path, case: dict[str, Any], scratch: Path
) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    return {"original_lines": [logical_lines(text) for text in data["inputs"]]}, None


def _pathglob_match(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    glob = PathGlob(data["patterns"])
    return {
        "error_count": len(glob.errors),
        "matches": [glob.matches(path) for path in data["paths"]],
        "patterns": glob.patterns,
    }, None


def _outputlimit_markers(
    case_dir: Path, case: dict[str, Any], scratch: Path
) -> tuple[JSON, Warnings]:
    """The one marker format, for each reason named (`markers`)."""
    data = _input(case_dir)
    counts = (data["kept_bytes"], data["orig_bytes"], data["kept_lines"], data["orig_lines"])
    return {"markers": {reason: marker(reason, *counts) for reason in data["reasons"]}}, None


def _pathglob_split(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    return split_glob_list(_input(case_dir)["list"]), None


def _tools_schema(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    """A coding tool's input schema seen through the golden's keys (`schema`): every key
    the golden sets must be phloem's too, with the same value; the description texts
    are phloem's own wording and the extra bounds phloem declares (a `maximum`, a
    `maxLength`) are its named limits, so neither is compared; enums compare as sets."""
    from phloem.tools.registry import coding_tools

    name = _input(case_dir)["tool"]
    tools = {tool.name: tool for tool in coding_tools()}
    if name not in tools:
        return {"error": f"no coding tool named {name!r}"}, None
    golden = json.loads((case_dir / "expected.json").read_text(encoding="utf-8"))
    return _through(golden, tools[name].input_schema), None


def _through(golden: Any, ours: Any) -> Any:
    """`ours` projected onto `golden`'s keys (see `_tools_schema`)."""
    if isinstance(golden, dict) and isinstance(ours, dict):
        out = {}
        for key, value in golden.items():
            if key == "description":
                out[key] = value
            elif key in ours:
                out[key] = _through(value, ours[key])
        return out
    if (
        isinstance(golden, list)
        and isinstance(ours, list)
        and sorted(map(str, golden)) == sorted(map(str, ours))
    ):
        return golden  # an enum: the same members
    return ours


def _tools_pathglob(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    glob = PathGlob(data["patterns"])
    return {
        "matches": {path: glob.matches(path) for path in data["paths"]},
        "patterns": glob.patterns,
    }, None


# -- tools -----------------------------------------------------------------------------


def _diff(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    context = int(data.get("context", 3))
    return {"diff": unified_diff(data["old_text"], data["new_text"], data["path"], context)}, None


def _edit(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    target = scratch / "file.txt"
    original = data["content"].encode()
    target.write_bytes(original)
    ctx, recorder = _context(scratch, "fixture", 10_000, OutputPolicy())
    ctx.workspace.record(ctx.session, "file.txt", original)
    args = {
        "path": "file.txt",
        "old_text": data["old_text"],
        "new_text": data["new_text"],
        "replace_all": data.get("replace_all", False),
    }
    result = EditTool().run(args, ctx)
    after = target.read_bytes()
    failed = is_failure(result)
    if failed and after != original:
        raise AssertionError("a failed edit changed the file")
    if len(recorder.touches) != (0 if failed else 1):
        raise AssertionError(f"edit emitted {len(recorder.touches)} touches")
    return {
        "ambiguity_lines": result.get("lines", []) if failed else [],
        "diff": "" if failed else result["diff"],
        "error_code": result["error"] if failed else "",
        "ok": not failed,
        "replacements": 0 if failed else result["replacements"],
        "result_content": "" if failed else after.decode(),
        "tier": "" if failed else result["match_tier"],
    }, None


def _read(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    root = scratch / "workspace"
    root.mkdir()
    setup = data.get("setup", "file")
    relative = data.get("path", "file.txt")
    content = data.get("file", "").encode()
    if setup == "file":
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(content)
    elif setup == "directory":
        (root / relative).mkdir(parents=True)
    elif setup == "escape":
        (scratch / relative).write_bytes(content)
    ctx, recorder = _context(
        root, "fixture", int(data.get("budget", 0)), _policy(data.get("output"))
    )
    if data.get("cancel"):
        ctx.cancel.set()
    tool = ReadTool(int(data.get("max_read_bytes", 0)) or ReadTool().max_read_bytes)
    result = tool.run(data.get("args", {}), ctx)
    failed = is_failure(result)
    return {
        "error": result["error"] if failed else "",
        "ledger": ctx.workspace.has_read(ctx.session, relative, content),
        "result": None if failed else result,
        "touches": len(recorder.touches),
    }, None


def _write(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    _seed(scratch, data.get("files", {}), case_dir)
    ctx, recorder = _context(scratch, data.get("session", ""), 10_000, OutputPolicy())
    for relative in data.get("read", []) or []:
        ctx.workspace.record(ctx.session, relative, (scratch / relative).read_bytes())
    args = data.get("args", {})
    result = WriteTool().run(args, ctx)
    failed = is_failure(result)
    error = ""
    if failed:
        message = str(result.get("message", ""))
        error = "content is required" if "content is required" in message else result["error"]
    relative = result["path"] if not failed else str(args.get("path", ""))
    target = scratch / str(args.get("path", ""))
    exists = target.is_file()
    body = target.read_bytes() if exists else b""
    temps = sum(
        1
        for _, dirs, files in os.walk(scratch)
        for name in dirs + files
        if name.startswith(TEMP_PREFIX)
    )
    return {
        "error": error,
        "file": body.decode(errors="replace"),
        "file_exists": exists,
        "ledger": ctx.workspace.has_read(ctx.session, relative, body),
        "ok": not failed,
        "result": None if failed else result,
        "temp_files": temps,
        "touches": len(recorder.touches),
    }, None


def _behaviour(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    _seed(scratch, data.get("files", {}), case_dir)
    ctx, recorder = _context(scratch, data.get("session", ""), 100_000, OutputPolicy())
    kind = case["kind"]
    args = data.get("args", {})
    if kind == "bash":
        from phloem.tools.bash import BashTool

        result = BashTool().run(args, ctx)
        if is_failure(result):
            return result, None
        keys = ("exit_code", "killed", "signal", "stderr", "stdout", "timed_out", "truncated")
        return {key: result[key] for key in keys}, None
    tools = {"grep": GrepTool(), "find": FindTool(), "ls": LsTool()}
    result = tools[kind].run(args, ctx)
    if is_failure(result):
        return result, None
    touched = [touch.path for touch in recorder.touches]
    if kind == "ls":
        entries = [{"path": e["path"], "type": e["type"]} for e in result["entries"]]
        return {"entries": entries, "touches": touched, "truncated": result["truncated"]}, None
    return {"result": result, "touches": touched}, None


def _walk(case_dir: Path, case: dict[str, Any], scratch: Path) -> tuple[JSON, Warnings]:
    data = _input(case_dir)
    _seed(scratch, data.get("files", {}), case_dir)
    raw = case.get("filter", {})
    flt = WalkFilter(
        include_globs=list(raw.get("include_globs") or []),
        exclude_globs=list(raw.get("exclude_globs") or []),
        skip_hidden=bool(raw.get("skip_hidden", False)),
        skip_vcs=bool(raw.get("skip_vcs", False)),
        respect_gitignore=bool(raw.get("respect_gitignore", False)),
        max_depth=int(raw.get("max_depth", -1)),
        max_visited=int(raw.get("max_visited", 0)),
        max_results=int(raw.get("max_results", 0)),
    )
    result = WalkResult()
    paths = [entry.path for entry in walk(os.path.realpath(scratch), ".", flt, result)]
    warnings = [
        {"code": w.code, "line": w.line, "path": w.path, "source": w.source}
        for w in result.warnings
    ]
    return {
        "error_code": "walk_truncated" if result.truncated else "",
        "ordered_paths": paths,
    }, warnings


for _area, _kind, _runner in (
    ("outputlimit", "apply", _outputlimit_apply),
    ("outputlimit", "logical_lines", _outputlimit_lines),
    ("pathglob", "match", _pathglob_match),
    ("outputlimit", "markers", _outputlimit_markers),
    ("pathglob", "split", _pathglob_split),
    ("pathglob", "invalid", _pathglob_match),  # the same result: errors counted, skipped
    ("tools", "schema", _tools_schema),
    ("tools", "pathglob", _tools_pathglob),
    ("tools", "diff", _diff),
    ("tools", "edit", _edit),
    ("tools", "read", _read),
    ("tools", "write", _write),
    ("tools", "bash", _behaviour),
    ("tools", "grep", _behaviour),
    ("tools", "find", _behaviour),
    ("tools", "ls", _behaviour),
    ("tools", "walk", _walk),
):
    register_runner(_area, _kind, _runner)


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    """A fresh temporary directory for one case."""
    return tempfile.TemporaryDirectory(prefix="phloem-conformance-")
