"""`phloem tool ...`: list the coding tools, show a schema, run one in a workspace.

    phloem tool list [--json]
    phloem tool schema NAME
    phloem tool run NAME JSON [--root DIR] [--session ID] [--config FILE]

These run in the CLI process (no daemon needed). `run` works on the workspace root
(default: the current directory) and prints the result as JSON; a failure value goes to
stderr instead (with `--json` to stdout as well) and exits 1; usage errors exit 2. With a
config file (`--config`, or the one search order) the tools take its `[tools]` limits
(bash's memory cap); without one, the defaults. `add_cli(commands)` plugs
them into the main `phloem` command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from phloem.cli.commands import EXIT_ERROR, EXIT_OK, CommandContext, Commands, UsageError

# The tools are imported by the commands that use them, not with the parser.


def add_cli(commands: Commands) -> None:
    """Register `tool list`, `tool schema` and `tool run` on the `phloem` command."""
    tool = commands.group("tool", "list, describe and run the coding tools")
    tool.add("list", "list the coding tools", _list)
    schema = tool.add("schema", "print a tool's JSON input schema", _schema)
    schema.add_argument("name")
    run = tool.add("run", "run a tool with JSON arguments in a workspace", _run)
    run.add_argument("name")
    run.add_argument("arguments", help='a JSON object, e.g. \'{"path": "README.md"}\'')
    run.add_argument("--root", default=".", help="workspace root (default: .)")
    run.add_argument("--session", default="cli", help="session id for the read ledger")


def _print(ctx: CommandContext, value: Any) -> None:
    ctx.out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    ctx.out.flush()


def _list(ctx: CommandContext) -> int:
    from phloem.tools.registry import default_registry

    tools = default_registry().tools()
    if ctx.json:
        _print(ctx, [tool.describe() for tool in tools])
        return EXIT_OK
    width = max(len(tool.name) for tool in tools)
    for tool in tools:
        summary = tool.description.split(". ")[0].rstrip(".")
        kind = "read-only" if tool.read_only else "mutating "
        ctx.out.write(f"{tool.name:<{width}}  {kind}  {summary}\n")
    return EXIT_OK


def _schema(ctx: CommandContext) -> int:
    from phloem.tools.registry import default_registry

    tool = default_registry().get(ctx.args.name)
    if tool is None:
        raise UsageError(f"unknown tool {ctx.args.name}")
    _print(ctx, tool.input_schema)
    return EXIT_OK


def _run(ctx: CommandContext) -> int:
    from phloem.tools.contract import is_failure
    from phloem.tools.registry import default_registry, run_tool

    try:
        arguments = json.loads(ctx.args.arguments)
    except json.JSONDecodeError as exc:
        raise UsageError(f"arguments are not valid JSON: {exc}") from exc
    root = Path(ctx.args.root)
    if not root.is_dir():
        raise UsageError(f"root is not a directory: {root}")
    registry = None
    config = ctx.config_path()
    if config is not None:  # the `[tools]` limits, e.g. bash's memory cap
        from phloem.config import load_config

        registry = default_registry(load_config(config).tools)
    result = run_tool(ctx.args.name, arguments, root, session=ctx.args.session, registry=registry)
    if not is_failure(result):
        _print(ctx, result)
        return EXIT_OK
    # a failure value is an error: on stderr (with --json, the value on stdout as well)
    if ctx.json:
        _print(ctx, result)
    ctx.err.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    ctx.err.flush()
    return EXIT_ERROR
