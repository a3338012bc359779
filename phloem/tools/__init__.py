"""Agent tools: the tool contract and registry, and the coding tools.

`Tool` is the one contract for anything a model can call: the coding tools, plain
functions (`FunctionTool`, `as_tool`) and the agents' `exit_loop` alike. The seven coding
tools (read, write, edit, bash, grep, find, ls) follow plasmid's contracts: exact JSON
input schemas, failures as values with a stable `error` code, workspace confinement, a
per-session read ledger, output limiting and a session budget.

    from phloem.tools import default_registry, ToolContext, Workspace
    ctx = ToolContext(workspace=Workspace("/path/to/repo"), session="s1")
    default_registry().run("grep", {"pattern": "TODO"}, ctx)
"""

from phloem.tools.contract import (
    FunctionTool,
    Tool,
    ToolContext,
    ToolWarning,
    as_tool,
    is_failure,
    object_schema,
    unknown_tool,
    validate_arguments,
)
from phloem.tools.diff import unified_diff
from phloem.tools.errors import ERROR_CODES, ToolFailure
from phloem.tools.ignorerules import PathGlob, RuleSet, split_glob_list
from phloem.tools.outputlimit import OutputBudget, OutputPolicy, Report
from phloem.tools.registry import ToolRegistry, coding_tools, default_registry, run_tool
from phloem.tools.workspace import Touch, Workspace

__all__ = [
    "ERROR_CODES",
    "FunctionTool",
    "OutputBudget",
    "OutputPolicy",
    "PathGlob",
    "Report",
    "RuleSet",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolRegistry",
    "ToolWarning",
    "Touch",
    "Workspace",
    "as_tool",
    "coding_tools",
    "default_registry",
    "is_failure",
    "object_schema",
    "run_tool",
    "split_glob_list",
    "unified_diff",
    "unknown_tool",
    "validate_arguments",
]
