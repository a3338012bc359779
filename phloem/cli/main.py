"""The `phloem` command: parse, dispatch to a handler, map errors to exit codes.

Every command takes `--socket PATH` (else `$PHLOEM_SOCKET`, else the socket of the
config file found by `phloem.base.paths.find_config`, else the default path), `--config FILE`
and `--json`, before or after the subcommand (`phloem --json status`). The commands
themselves live in `builtin` and in one module per feature; see `phloem.cli.commands` for
the contract.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from phloem._version import __version__
from phloem.cli.commands import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandContext,
    Commands,
    Parser,
    UsageError,
    add_common,
    to_json,
)
from phloem.protocols.errors import PhloemError

# Modules defining `add_cli(commands)`, in the order their commands are listed, each
# with the top-level commands it adds: a run of one command builds only its module's part
# of the parser (importing that module only). A test keeps the names true.
FEATURE_CLI_MODULES: dict[str, tuple[str, ...]] = {
    "phloem.cli.builtin": ("daemon", "config", "status", "tree", "top", "send", "stop"),
    "phloem.cli.control": ("start", "restart"),
    "phloem.cli.logs": ("logs",),
    "phloem.cli.runs": ("runs",),
    "phloem.cli.agents": ("agent",),
    "phloem.cli.eval": ("eval",),
    "phloem.cli.models": ("model", "ask"),
    "phloem.cli.planning": ("plan",),
    "phloem.cli.plugins": ("plugin",),
    "phloem.cli.sessions": ("session", "chat"),
    "phloem.cli.tools": ("tool",),
    "phloem.cli.instructions": ("instructions",),
    "phloem.cli.live": ("live",),
    "phloem.cli.mcp": ("mcp",),
    "phloem.cli.completion": ("completion",),
    "phloem.cli.telemetry": ("telemetry",),
    "phloem.cli.cluster": ("cluster",),
    "phloem.cli.web": ("web",),
    "phloem.cli.api": ("api",),
}
_TOP_VALUED = ("--socket", "--config")  # the top-level options that take a value


def build_parser(modules: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `phloem` parser with the commands of `modules` (default: every feature's)."""
    parser = Parser(
        prog="phloem", description="phloem: a supervised runtime for AI-agent workloads"
    )
    parser.add_argument("--version", action="version", version=f"phloem {__version__}")
    add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands = Commands(sub)
    for module in FEATURE_CLI_MODULES if modules is None else modules:
        importlib.import_module(module).add_cli(commands)
    return parser


def modules_for(argv: Sequence[str]) -> list[str] | None:
    """The feature modules a run with `argv` needs: the one adding its command; none for
    a bare `--version`; None (all of them) for help, usage errors and unknown commands."""
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help", "--"):
            return None  # the top-level help lists every command
        if arg in _TOP_VALUED:
            next(args, None)
        elif not arg.startswith("-"):
            found = [m for m, names in FEATURE_CLI_MODULES.items() if arg in names]
            return found or None
    return [] if "--version" in argv else None


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run one `phloem` command; its exit code (see `phloem.cli.commands`)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        code = _run(sys.argv[1:] if argv is None else argv, out, err)
        with contextlib.suppress(ValueError):  # an `out` closed already: nothing to flush
            out.flush()  # here, not at the interpreter's exit, where a closed pipe is noise
    except BrokenPipeError:
        return _reader_gone(out)
    return code


def _run(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    parser = build_parser(modules_for(argv))
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
        return int(getattr(args, "usage_exit", EXIT_USAGE))
    except PhloemError as exc:
        if ctx.json:
            out.write(to_json({"error": {"kind": exc.kind, "message": exc.message}}) + "\n")
        err.write(f"phloem: {exc.message} [{exc.kind}]\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except Exception as exc:  # a bug: one line, not a traceback
        err.write(f"phloem {args.command}: unexpected {type(exc).__name__}: {exc} (a bug)\n")
        return EXIT_ERROR


def _reader_gone(out: TextIO) -> int:
    """stdout's reader has gone (`phloem top | head`): what is still buffered goes to
    /dev/null, so the interpreter's last flush does not fail again, and the command ends
    quietly with `EXIT_BROKEN_PIPE`."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def _quiet_logging(args: argparse.Namespace) -> None:
    """Client commands log only warnings, to stderr, for humans (the daemon reconfigures)."""
    if args.command == "daemon":
        return
    from phloem.base.logs import configure_logging

    configure_logging("warning", "console")


if __name__ == "__main__":
    sys.exit(main())
