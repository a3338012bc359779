"""The `phloem` command: parse, dispatch to a handler, map errors to exit codes.

Every command takes `--socket PATH` (else `$PHLOEM_SOCKET`, else the socket of the
config file found by `phloem.base.paths.find_config`, else the default path), `--config FILE`
and `--json`, before or after the subcommand (`phloem --json status`). The commands
themselves live in `builtin` and in one module per feature; see `phloem.cli.commands` for
the contract.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TextIO

from phloem._version import __version__
from phloem.cli.commands import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandContext,
    Commands,
    UsageError,
    add_common,
    to_json,
)
from phloem.protocols.errors import PhloemError

# Modules defining `add_cli(commands)`, in the order their commands are listed.
FEATURE_CLI_MODULES: list[str] = [
    "phloem.cli.builtin",
    "phloem.cli.runs",
    "phloem.cli.agents",
    "phloem.cli.eval",
    "phloem.cli.models",
    "phloem.cli.planning",
    "phloem.cli.plugins",
    "phloem.cli.sessions",
    "phloem.cli.tools",
    "phloem.cli.instructions",
    "phloem.cli.live",
    "phloem.cli.mcp",
    "phloem.cli.completion",
    "phloem.cli.telemetry",
    "phloem.cli.cluster",
    "phloem.cli.web",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="phloem", description="phloem: a supervised runtime for AI-agent workloads"
    )
    parser.add_argument("--version", action="version", version=f"phloem {__version__}")
    add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands = Commands(sub)
    for module in FEATURE_CLI_MODULES:
        importlib.import_module(module).add_cli(commands)
    return parser


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    _quiet_logging(args)
    ctx = CommandContext(args, out, err)
    try:
        return int(args.handler(ctx))
    except UsageError as exc:
        err.write(f"phloem {args.command}: {exc}\n")
        return EXIT_USAGE
    except PhloemError as exc:
        if ctx.json:
            out.write(to_json({"error": {"kind": exc.kind, "message": exc.message}}) + "\n")
        err.write(f"phloem: {exc.message} [{exc.kind}]\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("\n")
        return EXIT_INTERRUPTED


def _quiet_logging(args: argparse.Namespace) -> None:
    """Client commands log only warnings, to stderr, for humans (the daemon reconfigures)."""
    if args.command == "daemon":
        return
    from phloem.base.logs import configure_logging

    configure_logging("warning", "console")


if __name__ == "__main__":
    sys.exit(main())
