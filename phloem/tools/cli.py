"""`phloem tool ...`: list the coding tools, show a schema, run one in a workspace.

    phloem tool list [--json]
    phloem tool schema NAME
    phloem tool run NAME JSON [--root DIR] [--session ID]

These run in the CLI process (no daemon needed). `run` works on the workspace root
(default: the current directory) and prints the result as JSON; it exits 1 when the tool
returned a failure value, 2 on usage errors. `add_cli(commands)` plugs them into the
main `phloem` command; `python -m phloem.tools.cli tool ...` runs them on their own.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from phloem.tools.contract import is_failure
from phloem.tools.registry import default_registry, run_tool

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Context(Protocol):
    """The part of the main CLI's command context these handlers use."""

    args: argparse.Namespace
    json: bool
    out: TextIO
    err: TextIO


class CommandsLike(Protocol):
    def add(
        self, name: str, help: str, handler: Callable[[Any], int]
    ) -> argparse.ArgumentParser: ...

    def group(self, name: str, help: str) -> CommandsLike: ...


def add_cli(commands: CommandsLike) -> None:
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


def _print(ctx: Context, value: Any) -> None:
    ctx.out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    ctx.out.flush()


def _list(ctx: Context) -> int:
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


def _schema(ctx: Context) -> int:
    tool = default_registry().get(ctx.args.name)
    if tool is None:
        ctx.err.write(f"error: unknown tool {ctx.args.name}\n")
        return EXIT_USAGE
    _print(ctx, tool.input_schema)
    return EXIT_OK


def _run(ctx: Context) -> int:
    try:
        arguments = json.loads(ctx.args.arguments)
    except json.JSONDecodeError as exc:
        ctx.err.write(f"error: arguments are not valid JSON: {exc}\n")
        return EXIT_USAGE
    root = Path(ctx.args.root)
    if not root.is_dir():
        ctx.err.write(f"error: root is not a directory: {root}\n")
        return EXIT_USAGE
    result = run_tool(ctx.args.name, arguments, root, session=ctx.args.session)
    _print(ctx, result)
    return EXIT_FAILED if is_failure(result) else EXIT_OK


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """`python -m phloem.tools.cli tool ...` (the same commands as `phloem tool ...`)."""
    from phloem.cli import main as phloem_main

    return phloem_main(list(sys.argv[1:] if argv is None else argv), out, err)


if __name__ == "__main__":
    sys.exit(main())
