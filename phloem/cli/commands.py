"""The one command contract: every `phloem` subcommand is a handler `(ctx) -> int` added
through `Commands`, and gets a `CommandContext`. Exit codes: 0 success, 1 error (one line
on stderr), 2 usage error (`UsageError`, raised by any handler for a bad argument, or a
flag argparse cannot parse; a command whose 2 means something else gives its parser
another `usage_exit`, as `eval run` does), 130 interrupted (Ctrl-C), 141 when stdout's
reader went away (`phloem top | head`: quietly, as shells report a program ended by
SIGPIPE). Errors always go to stderr, as one line, never a traceback; with `--json` the
error value is also printed on stdout.

A feature adds its commands in its own module under `phloem.cli` (listed, with the
top-level commands it adds, in `phloem.cli.main.FEATURE_CLI_MODULES`: a run of one
command imports only its module), defining `add_cli(commands: Commands)`:

    def add_cli(commands: Commands) -> None:
        p = commands.add("plan", "run a plan and print its result", _plan)
        p.add_argument("file")

    def _plan(ctx: CommandContext) -> int:
        with ctx.client() as client:
            result = client.run_planning(...)
        ctx.emit(result, text=f"outcome: {result.outcome}")
        return 0
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import msgspec

from phloem.base.paths import SOCKET_ENV, default_socket_path, find_config

if TYPE_CHECKING:
    from phloem.client.sync import Client


EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as shells report `cmd | head` when head exits first

Handler = Callable[["CommandContext"], int]


class Parser(argparse.ArgumentParser):
    """argparse with a per-command usage exit code: a parse error of a (sub)command exits
    with its `usage_exit` (default `EXIT_USAGE`); unrecognized arguments, which argparse
    reports from the top parser, with the exit code of the command they were given to
    (its `usage_exit` default)."""

    usage_exit = EXIT_USAGE

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_exit, f"{self.prog}: error: {message}\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self.print_usage(sys.stderr)
            code = getattr(parsed, "usage_exit", self.usage_exit)
            self.exit(code, f"{self.prog}: error: unrecognized arguments: {' '.join(extra)}\n")
        return parsed


def set_usage_exit(parser: argparse.ArgumentParser, code: int) -> None:
    """Make `code` the exit code of every usage error of `parser`'s command."""
    parser.usage_exit = code  # type: ignore[attr-defined]
    parser.set_defaults(usage_exit=code)


class UsageError(Exception):
    """A bad argument found after parsing (exit code 2)."""


class CommandContext:
    """What a command handler gets: parsed args, output helpers and a client factory."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.json: bool = bool(getattr(args, "json", False))
        self.out = out
        self.err = err

    def config_path(self) -> Path | None:
        """The config file of this command (`phloem.base.paths.find_config`: `--config`,
        `$PHLOEM_CONFIG`, `./phloem.toml`, the user's, the system's), or None."""
        return find_config(getattr(self.args, "config", None))

    def socket_path(self) -> Path:
        """`--socket`, else `$PHLOEM_SOCKET`, else the socket of the config file found,
        else the default path."""
        if getattr(self.args, "socket", None):
            return Path(self.args.socket)
        env = os.environ.get(SOCKET_ENV)
        if env:
            return Path(env)
        config = self.config_path()
        if config is not None:
            from phloem.config import load_config

            return load_config(config).daemon.socket_path()
        return default_socket_path()

    def client(self, timeout: float = 5.0) -> Client:
        """Connect to the daemon (`no_daemon` if there is none)."""
        from phloem.client.sync import Client

        return Client.connect(self.socket_path(), timeout=timeout)

    def emit(self, value: Any, text: str | None = None) -> None:
        """Print `value` as JSON with --json, else `text` (or JSON when no text)."""
        if self.json or text is None:
            self.out.write(to_json(value) + "\n")
        else:
            self.out.write(text.rstrip("\n") + "\n")
        self.out.flush()


def to_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


class Commands:
    """Adds subcommands, each with the common `--socket`, `--config` and `--json`."""

    def __init__(self, subparsers: Any) -> None:
        self._sub = subparsers

    def add(self, name: str, help: str, handler: Handler) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._sub.add_parser(name, help=help, description=help)
        add_common(parser)
        parser.set_defaults(handler=handler)
        return parser

    def group(self, name: str, help: str) -> Commands:
        """A command with its own subcommands (`phloem config check`)."""
        parser = self._sub.add_parser(name, help=help, description=help)
        sub = parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)
        return Commands(sub)


def add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """`--socket`, `--config`, `--json`: on the `phloem` command itself (`top`, with their
    defaults) and again on every subcommand, where they are left out of the result unless
    given (`SUPPRESS`), so `phloem --json status` and `phloem status --json` both work."""
    default: Any = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument("--socket", metavar="PATH", help="daemon socket path", **default)
    parser.add_argument("--config", metavar="FILE", help="phloem TOML config file", **default)
    parser.add_argument(
        "--json", action="store_true", help="machine-readable JSON output", **default
    )


# --- built-in commands ------------------------------------------------------------------
