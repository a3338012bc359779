"""`phloem tool ...`: list the coding tools, show a schema, run one in a workspace.

    phloem tool list [--json]
    phloem tool schema NAME
    phloem tool run NAME JSON [--root DIR] [--session ID]

`run` runs in this process against the workspace root (default: the current directory)
and prints the result as JSON; it exits 1 when the tool returned a failure value.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from phloem.tools.contract import is_failure
from phloem.tools.registry import default_registry, run_tool


def add_cli(subparsers: Any) -> None:
    """Register the `tool` command on an argparse subparsers object."""
    tool = subparsers.add_parser("tool", help="list, describe and run the coding tools")
    commands = tool.add_subparsers(dest="tool_command", required=True)
    listing = commands.add_parser("list", help="list the tools")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=_list)
    schema = commands.add_parser("schema", help="print a tool's JSON input schema")
    schema.add_argument("name")
    schema.set_defaults(func=_schema)
    run = commands.add_parser("run", help="run a tool with JSON arguments")
    run.add_argument("name")
    run.add_argument("arguments", help='JSON object, e.g. \'{"path": "README.md"}\'')
    run.add_argument("--root", default=".", help="workspace root (default: .)")
    run.add_argument("--session", default="cli", help="session id for the read ledger")
    run.set_defaults(func=_run)


def _list(options: argparse.Namespace) -> int:
    tools = default_registry().tools()
    if options.json:
        print(json.dumps([tool.describe() for tool in tools], indent=2))
        return 0
    width = max(len(tool.name) for tool in tools)
    for tool in tools:
        summary = tool.description.split(". ")[0].rstrip(".")
        flag = "read-only" if tool.read_only else "mutating "
        print(f"{tool.name:<{width}}  {flag}  {summary}")
    return 0


def _schema(options: argparse.Namespace) -> int:
    tool = default_registry().get(options.name)
    if tool is None:
        print(f"error: unknown tool {options.name}", file=sys.stderr)
        return 2
    print(json.dumps(tool.input_schema, indent=2))
    return 0


def _run(options: argparse.Namespace) -> int:
    try:
        arguments = json.loads(options.arguments)
    except json.JSONDecodeError as exc:
        print(f"error: arguments are not valid JSON: {exc}", file=sys.stderr)
        return 2
    root = Path(options.root)
    if not root.is_dir():
        print(f"error: root is not a directory: {root}", file=sys.stderr)
        return 2
    result = run_tool(options.name, arguments, root, session=options.session)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 1 if is_failure(result) else 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m phloem.tools.cli tool ...`) for use without phloem.cli."""
    parser = argparse.ArgumentParser(prog="phloem")
    add_cli(parser.add_subparsers(dest="command", required=True))
    options = parser.parse_args(argv)
    code: int = options.func(options)
    return code


if __name__ == "__main__":
    sys.exit(main())
