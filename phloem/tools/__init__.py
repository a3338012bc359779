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

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.tools.contract import (
        FunctionTool as FunctionTool,
        Tool as Tool,
        ToolContext as ToolContext,
        ToolWarning as ToolWarning,
        as_tool as as_tool,
        is_failure as is_failure,
        object_schema as object_schema,
        unknown_tool as unknown_tool,
        validate_arguments as validate_arguments,
    )
    from phloem.tools.diff import (
        unified_diff as unified_diff,
    )
    from phloem.tools.errors import (
        ERROR_CODES as ERROR_CODES,
        ToolFailure as ToolFailure,
    )
    from phloem.tools.ignorerules import (
        PathGlob as PathGlob,
        RuleSet as RuleSet,
        split_glob_list as split_glob_list,
    )
    from phloem.tools.outputlimit import (
        OutputBudget as OutputBudget,
        OutputPolicy as OutputPolicy,
        Report as Report,
    )
    from phloem.tools.registry import (
        ToolRegistry as ToolRegistry,
        coding_tools as coding_tools,
        default_registry as default_registry,
        run_tool as run_tool,
    )
    from phloem.tools.workspace import (
        Touch as Touch,
        Workspace as Workspace,
    )

_EXPORTS: dict[str, str] = {
    "ERROR_CODES": "phloem.tools.errors",
    "FunctionTool": "phloem.tools.contract",
    "OutputBudget": "phloem.tools.outputlimit",
    "OutputPolicy": "phloem.tools.outputlimit",
    "PathGlob": "phloem.tools.ignorerules",
    "Report": "phloem.tools.outputlimit",
    "RuleSet": "phloem.tools.ignorerules",
    "Tool": "phloem.tools.contract",
    "ToolContext": "phloem.tools.contract",
    "ToolFailure": "phloem.tools.errors",
    "ToolRegistry": "phloem.tools.registry",
    "ToolWarning": "phloem.tools.contract",
    "Touch": "phloem.tools.workspace",
    "Workspace": "phloem.tools.workspace",
    "as_tool": "phloem.tools.contract",
    "coding_tools": "phloem.tools.registry",
    "default_registry": "phloem.tools.registry",
    "is_failure": "phloem.tools.contract",
    "object_schema": "phloem.tools.contract",
    "run_tool": "phloem.tools.registry",
    "split_glob_list": "phloem.tools.ignorerules",
    "unified_diff": "phloem.tools.diff",
    "unknown_tool": "phloem.tools.contract",
    "validate_arguments": "phloem.tools.contract",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
