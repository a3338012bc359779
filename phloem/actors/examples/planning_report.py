"""Example planning adapters: a repository report planned and run without a model.

`ReportPlanner` plans four read-only steps over a repository — list the top level, count
source files, find TODO/FIXME markers, read the README — and reviews each observation.
If the README step fails (no such file) it *replans*: the next revision reads
`pyproject.toml` instead.

`ReadOnlyToolsExecutor` runs a small declared vocabulary of read-only tools — `ls`,
`find`, `grep`, `read` — confined to the root in its request target
(``{"root": "/path"}``, default: the daemon's working directory). Paths that resolve
outside the root (``..``, absolute paths, symlinks) are refused. Every answer is bounded
by the limits below. Actions are data: anything outside the vocabulary is an error.

Register both in the daemon config::

    [planning.planners]
    report = "phloem.actors.examples.planning_report:ReportPlanner"
    [planning.executors]
    readonly_tools = "phloem.actors.examples.planning_report:ReadOnlyToolsExecutor"
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any

from phloem.protocols.plan import Complete, Continue, Error, Ok, Plan, Replan, Step

MAX_LS_ENTRIES = 200
MAX_FIND_RESULTS = 500
MAX_GREP_MATCHES = 50
MAX_GREP_FILE_BYTES = 1024 * 1024
MAX_READ_LINES = 40
MAX_READ_BYTES = 64 * 1024
MAX_WALK_FILES = 20_000
SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache"})
PROJECT_FILE = "pyproject.toml"


def _steps(readme: str) -> list[dict[str, Any]]:
    return [
        {
            "id": "layout",
            "description": "List the top level",
            "action": {"tool": "ls", "path": "."},
        },
        {
            "id": "sources",
            "description": "Count Python sources",
            "action": {"tool": "find", "pattern": "*.py"},
        },
        {
            "id": "markers",
            "description": "Find TODO and FIXME markers",
            "action": {"tool": "grep", "pattern": r"\b(TODO|FIXME)\b", "glob": "*.py"},
        },
        {
            "id": "readme",
            "description": f"Read the head of {readme}",
            "action": {"tool": "read", "path": readme, "max_lines": 10},
        },
    ]


class ReportPlanner:
    """Plans a repository report; replans around a missing README."""

    def plan(self, target: Any, goal: Any, context: Any, config: Any) -> Any:
        readme = "README.md"
        if isinstance(goal, dict) and isinstance(goal.get("readme"), str):
            readme = goal["readme"]
        doc = {
            "id": "repository-report",
            "revision": 0,
            "goal": goal,
            "steps": _steps(readme),
            "metadata": {"planner": "report"},
        }
        return Ok(doc)

    def review(
        self,
        target: Any,
        plan: Plan,
        step: Step,
        observation: dict[str, Any],
        context: Any,
        config: Any,
    ) -> Any:
        if observation["status"] == "ok":
            if step.id == plan.steps[-1].id:
                return Complete({"summary": f"{len(plan.steps)} facts gathered", "last": step.id})
            return Continue()
        if step.id == "readme" and plan.revision == 0:
            fallback = PROJECT_FILE
            steps = [
                {
                    "id": "project-file",
                    "description": f"Read the head of {fallback}",
                    "action": {"tool": "read", "path": fallback, "max_lines": 10},
                }
            ]
            new = plan.to_builtins() | {"revision": plan.revision + 1, "steps": steps}
            return Replan(new)
        return Continue()


class ReadOnlyToolsExecutor:
    """Runs the declared read-only tools inside the target's root."""

    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        root_text = target.get("root") if isinstance(target, dict) else None
        root = Path(root_text or os.getcwd()).resolve()
        action = step.action
        tool = action.get("tool")
        try:
            if tool == "ls":
                return Ok(_ls(root, action.get("path", ".")))
            if tool == "find":
                return Ok(_find(root, str(action.get("pattern", "*"))))
            if tool == "grep":
                return Ok(_grep(root, str(action["pattern"]), str(action.get("glob", "*"))))
            if tool == "read":
                return Ok(_read(root, action["path"], int(action.get("max_lines", MAX_READ_LINES))))
        except (OSError, ValueError, KeyError, re.error) as exc:
            return Error({"tool": tool, "error": type(exc).__name__, "message": str(exc)[:200]})
        return Error({"tool": tool, "error": "unknown_tool"})


def _inside(root: Path, rel: Any) -> Path:
    if not isinstance(rel, str):
        raise ValueError("path must be a string")
    path = (root / rel).resolve()
    if path != root and root not in path.parents:
        raise ValueError(f"{rel} is outside the root")
    return path


def _ls(root: Path, rel: Any) -> dict[str, Any]:
    path = _inside(root, rel)
    entries = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name)[:MAX_LS_ENTRIES]:
        kind = "dir" if entry.is_dir(follow_symlinks=False) else "file"
        entries.append({"name": entry.name, "type": kind})
    return {"path": rel, "entries": entries}


def _walk(root: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            files.append(Path(dirpath) / name)
            if len(files) >= MAX_WALK_FILES:
                return files
    return files


def _find(root: Path, pattern: str) -> dict[str, Any]:
    matches = [str(p.relative_to(root)) for p in _walk(root) if fnmatch.fnmatch(p.name, pattern)]
    return {"pattern": pattern, "count": len(matches), "files": matches[:MAX_FIND_RESULTS]}


def _grep(root: Path, pattern: str, glob: str) -> dict[str, Any]:
    regex = re.compile(pattern)
    matches: list[dict[str, Any]] = []
    total = 0
    for path in _walk(root):
        if not fnmatch.fnmatch(path.name, glob) or path.stat().st_size > MAX_GREP_FILE_BYTES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(matches) < MAX_GREP_MATCHES:
                    rel = str(path.relative_to(root))
                    matches.append({"file": rel, "line": number, "text": line.strip()[:200]})
    return {"pattern": pattern, "count": total, "matches": matches}


def _read(root: Path, rel: Any, max_lines: int) -> dict[str, Any]:
    path = _inside(root, rel)
    with path.open("rb") as fh:
        data = fh.read(MAX_READ_BYTES)
    lines = data.decode("utf-8", errors="replace").splitlines()
    keep = max(1, min(max_lines, MAX_READ_LINES))
    return {"path": rel, "lines": lines[:keep], "truncated": len(lines) > keep}
