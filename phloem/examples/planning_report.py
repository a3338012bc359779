"""Example planning adapters: a repository report planned and run without a model.

`ReportPlanner` plans four read-only steps over a repository — list the top level, count
source files, find TODO/FIXME markers, read the README — and reviews each observation.
If the README step fails (no such file) it *replans*: the next revision reads
`pyproject.toml` instead.

`ReadOnlyToolsExecutor` runs a declared read-only coding tool — `ls`, `find`, `grep`,
`read` from `phloem.tools` — for each step's action
``{"tool": NAME, "args": {...}}``, in a workspace at the root of its request target
(``{"root": "/path"}``, default: the daemon's working directory). The tools confine every
path to that root, honour .gitignore and bound their output; a tool failure value
(``{"error": code, ...}``) becomes the step's `Error`. Actions are data: a tool outside
the read-only vocabulary is an error (`unknown_tool`), never looked up elsewhere.

Register both in the daemon config::

    [planning.planners]
    report = "phloem.examples.planning_report:ReportPlanner"
    [planning.executors]
    readonly_tools = "phloem.examples.planning_report:ReadOnlyToolsExecutor"
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from phloem.protocols.errors import ErrorKind
from phloem.protocols.plan import Plan, Step
from phloem.protocols.result import Complete, Continue, Error, Ok, Replan
from phloem.tools.contract import Tool, ToolContext
from phloem.tools.find import FindTool
from phloem.tools.grep import GrepTool
from phloem.tools.ls import LsTool
from phloem.tools.read import ReadTool
from phloem.tools.workspace import Workspace

READ_ONLY_TOOLS: dict[str, type[Tool]] = {
    "ls": LsTool,
    "find": FindTool,
    "grep": GrepTool,
    "read": ReadTool,
}
PROJECT_FILE = "pyproject.toml"


def _step(step_id: str, description: str, tool: str, **args: Any) -> dict[str, Any]:
    return {"id": step_id, "description": description, "action": {"tool": tool, "args": args}}


def _steps(readme: str) -> list[dict[str, Any]]:
    return [
        _step("layout", "List the top level", "ls", path="."),
        _step("sources", "Find the Python sources", "find", glob="**/*.py"),
        _step("markers", "Find TODO and FIXME markers", "grep", pattern=r"\b(TODO|FIXME)\b"),
        _step("readme", f"Read the head of {readme}", "read", path=readme, limit=10),
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
                _step(
                    "project-file", f"Read the head of {fallback}", "read", path=fallback, limit=10
                )
            ]
            new = plan.to_builtins() | {"revision": plan.revision + 1, "steps": steps}
            return Replan(new)
        return Continue()


class ReadOnlyToolsExecutor:
    """Runs one declared read-only coding tool inside the target's root."""

    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        root_text = target.get("root") if isinstance(target, dict) else None
        root = Path(root_text or os.getcwd()).resolve()
        action = step.action
        tool, args = action.get("tool"), action.get("args", {})
        if not isinstance(tool, str) or tool not in READ_ONLY_TOOLS:
            return Error({"error": "unknown_tool", "tool": tool})
        ctx = ToolContext(workspace=Workspace(root), session=f"planning-{step.id}")
        output = READ_ONLY_TOOLS[tool]().run(args, ctx)
        if isinstance(output, dict) and "error" in output:
            return Error(output)
        return Ok(output)


def run_workload(client: Any, root: str = ".", out: Any = None) -> bool:
    """The `make run` workload: a repository report planned and run through `client`
    (a `phloem.Client` connected to a daemon with the adapters above). Prints progress
    and the result; True if the run completed."""
    import sys

    from phloem.cli.planning import ProgressLines, render_result

    stream = out or sys.stdout
    progress = ProgressLines()
    result = client.run_planning(
        "report",
        {"name": "readonly_tools", "target": {"root": str(Path(root).resolve())}},
        {"report": "repository"},
        {"invocation_id": "make-run"},
        {"max_steps": 8, "max_replans": 1, "timeout_ms": 60_000},
        on_event=lambda event: print(progress.line(event), file=stream, flush=True),
    )
    print(render_result(result), file=stream, flush=True)
    return bool(result.status == "completed")


def _report_step(client: Any) -> str:
    import io

    from phloem.protocols.errors import PhloemError

    out = io.StringIO()
    if not run_workload(client, ".", out):
        raise PhloemError(
            ErrorKind.EXAMPLE_FAILED, "the repository report did not complete:\n" + out.getvalue()
        )
    return out.getvalue()


def steps() -> list[Any]:
    """The `make run` steps (`phloem.examples.run_all.EXAMPLE_MODULES`)."""
    from phloem.examples.run_all import Step

    return [Step("planning: repository report (planner + read-only tools executor)", _report_step)]
