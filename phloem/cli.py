"""The `phloem` command: daemon, config check, status, tree, top, send, stop.

Every command takes `--socket PATH` (else `$PHLOEM_SOCKET`, else the socket of
`--config FILE`, else the default path) and `--json`. Exit codes: 0 success, 1 error
(one line on stderr), 2 usage error.

Feature modules add their own subcommands without touching this file's logic: list the
module in `FEATURE_CLI_MODULES`; it must define `add_cli(commands: Commands)` and call
`commands.add(name, help, handler)` for each command, where `handler(ctx) -> int` uses
`ctx.client()` and `ctx.emit(...)`:

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
import importlib
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

import phloem
from phloem.protocols.errors import PhloemError

if TYPE_CHECKING:
    from phloem.client import Client

# Modules defining `add_cli(commands)`: appended to by feature modules' owners.
FEATURE_CLI_MODULES: list[str] = [
    "phloem.agents_cli",
    "phloem.models.cli",
    "phloem.planning_cli",
    "phloem.tools.cli",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
DEFAULT_TOP_INTERVAL_S = 1.0
TOP_INTERVAL_RANGE = (0.05, 3600.0)

Handler = Callable[["CommandContext"], int]


class UsageError(Exception):
    """A bad argument found after parsing (exit code 2)."""


class CommandContext:
    """What a command handler gets: parsed args, output helpers and a client factory."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.json: bool = bool(getattr(args, "json", False))
        self.out = out
        self.err = err

    def socket_path(self) -> Path:
        if getattr(self.args, "socket", None):
            return Path(self.args.socket)
        env = os.environ.get("PHLOEM_SOCKET")
        if env:
            return Path(env)
        from phloem.config import default_socket_path, load_config

        config = getattr(self.args, "config", None)
        if config:
            return load_config(config).daemon.socket_path()
        return default_socket_path()

    def client(self, timeout: float = 5.0) -> Client:
        """Connect to the daemon (`no_daemon` if there is none)."""
        from phloem.client import Client

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


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", metavar="PATH", help="daemon socket path")
    parser.add_argument("--config", metavar="FILE", help="phloem TOML config file")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


# --- built-in commands ------------------------------------------------------------------


def _cmd_daemon(ctx: CommandContext) -> int:
    from phloem.config import load_config
    from phloem.daemon import run

    config = load_config(ctx.args.config)
    if ctx.args.socket:
        config.daemon.socket = ctx.args.socket
        config = msgspec.convert(msgspec.to_builtins(config), type(config))
    return run(config)


def _cmd_config_check(ctx: CommandContext) -> int:
    from phloem.config import load_config, resolved, to_toml

    config = load_config(ctx.args.config)
    data = resolved(config)
    ctx.emit(data, text=to_toml(data))
    return EXIT_OK


def _cmd_status(ctx: CommandContext) -> int:
    with ctx.client() as client:
        status = client.status()
    ctx.emit(status, text=render_status(status))
    return EXIT_OK


def _cmd_tree(ctx: CommandContext) -> int:
    with ctx.client() as client:
        snap = client.tree()
    ctx.emit(snap, text=render_tree(snap))
    return EXIT_OK


def _cmd_top(ctx: CommandContext) -> int:
    interval = ctx.args.interval
    lo, hi = TOP_INTERVAL_RANGE
    if not lo <= interval <= hi:
        raise UsageError(f"interval must be between {lo} and {hi}")
    iterations = ctx.args.iterations
    if iterations is not None and iterations < 1:
        raise UsageError("iterations must be >= 1")
    stop = threading.Event()
    count = 0
    with ctx.client() as client:
        try:
            while not stop.is_set():
                status, snap = client.status(), client.tree()
                if ctx.json:
                    ctx.out.write(to_json({"status": status, "tree": snap}) + "\n")
                else:
                    ctx.out.write("\x1b[H\x1b[2J" + render_status(status) + "\n\n")
                    ctx.out.write(render_table(snap) + "\n")
                    ctx.out.write("(Ctrl-C to quit)\n")
                ctx.out.flush()
                count += 1
                if iterations is not None and count >= iterations:
                    break
                stop.wait(interval)
        except KeyboardInterrupt:
            pass
    return EXIT_OK


def _cmd_send(ctx: CommandContext) -> int:
    try:
        message = json.loads(ctx.args.message)
    except json.JSONDecodeError as exc:
        raise UsageError(f"MESSAGE is not valid JSON: {exc}") from exc
    with ctx.client() as client:
        if ctx.args.tell:
            client.tell(ctx.args.actor, message)
            reply: Any = None
        else:
            reply = client.ask(ctx.args.actor, message, timeout=ctx.args.timeout)
    ctx.emit(reply, text=to_json(reply))
    return EXIT_OK


def _cmd_stop(ctx: CommandContext) -> int:
    from phloem.client import SocketTransport

    with ctx.client() as client:
        pid = client.status().pid
        client.stop_daemon()
        transport = client.transport
        stopped = isinstance(transport, SocketTransport) and transport.wait_closed(ctx.args.timeout)
    if not stopped:
        raise PhloemError("timeout", f"the daemon (pid {pid}) did not stop in time")
    ctx.emit({"stopped": True, "pid": pid}, text=f"phloem daemon (pid {pid}) stopped")
    return EXIT_OK


# --- rendering --------------------------------------------------------------------------


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def human_duration(seconds: float) -> str:
    s = int(seconds)
    d, s = divmod(s, 86_400)
    h, s = divmod(s, 3_600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m {s}s"
    return f"{m}m {s}s" if m else f"{seconds:.1f}s"


def render_status(st: Any) -> str:
    memory = human_bytes(st.rss_bytes)
    if st.children_rss_bytes:
        memory += f" (+{human_bytes(st.children_rss_bytes)} in child processes)"
    return "\n".join(
        [
            f"phloem {st.version} · pid {st.pid} · {st.state} · up {human_duration(st.uptime_s)}",
            f"socket     {st.socket or '-'}",
            f"services   {', '.join(st.services) or '-'}",
            f"actors     {st.actors}   processes {st.processes}   supervisors {st.supervisors}",
            f"restarts   {st.restarts}",
            f"memory     {memory}   threads {st.threads}",
            f"clients    {st.connections} connected · {st.refs} refs · {st.streams} streams",
        ]
    )


def _where(node: Any) -> str:
    if node.pid is not None:
        return f"pid {node.pid}"
    return f"thread {node.thread}" if node.thread else "-"


def render_tree(snap: Any) -> str:
    lines: list[str] = []

    def label(node: Any) -> str:
        parts = [node.id, node.type, node.state, _where(node)]
        if node.strategy:
            parts.insert(2, node.strategy)
        if node.restarts:
            parts.append(f"restarts {node.restarts}")
        if node.mailbox_depth:
            parts.append(f"mailbox {node.mailbox_depth}")
        if node.credit_in_use:
            parts.append(f"credit {node.credit_in_use}")
        if node.rss_bytes is not None:
            parts.append(human_bytes(node.rss_bytes))
        return "  ".join(parts)

    def walk(node: Any, prefix: str, last: bool, top: bool) -> None:
        if top:
            lines.append(label(node))
            child_prefix = ""
        else:
            lines.append(prefix + ("└── " if last else "├── ") + label(node))
            child_prefix = prefix + ("    " if last else "│   ")
        for i, child in enumerate(node.children):
            walk(child, child_prefix, i == len(node.children) - 1, False)

    for root in snap.roots:
        walk(root, "", True, True)
    return "\n".join(lines) if lines else "(no supervisors running)"


def render_table(snap: Any) -> str:
    header = f"{'ID':<32} {'TYPE':<10} {'PID/THREAD':<24} {'STATE':<10} {'RST':>4} "
    header += f"{'MBOX':>5} {'CRED':>5} {'RSS':>10}"
    rows = [header]

    def walk(node: Any, depth: int) -> None:
        name = ("  " * depth + node.id)[:32]
        rows.append(
            f"{name:<32} {node.type:<10} {_where(node)[:24]:<24} {node.state:<10} "
            f"{node.restarts:>4} {node.mailbox_depth:>5} {node.credit_in_use:>5} "
            f"{human_bytes(node.rss_bytes):>10}"
        )
        for child in node.children:
            walk(child, depth + 1)

    for root in snap.roots:
        walk(root, 0)
    return "\n".join(rows)


# --- parser and main --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="phloem", description="phloem: a supervised runtime for AI-agent workloads"
    )
    parser.add_argument("--version", action="version", version=f"phloem {phloem.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands = Commands(sub)
    commands.add("daemon", "run the daemon in the foreground", _cmd_daemon)
    config = commands.group("config", "configuration tools")
    config.add(
        "check", "validate a config file and print it resolved (secrets masked)", _cmd_config_check
    )
    commands.add("status", "one-screen summary of the daemon", _cmd_status)
    commands.add("tree", "the supervision tree", _cmd_tree)
    top = commands.add("top", "live view of every actor, refreshed until Ctrl-C", _cmd_top)
    top.add_argument(
        "--interval", type=float, default=DEFAULT_TOP_INTERVAL_S, help="seconds between refreshes"
    )
    top.add_argument("--iterations", type=int, default=None, help="stop after N refreshes")
    send = commands.add("send", "ask a named actor and print its reply", _cmd_send)
    send.add_argument("actor", metavar="ACTOR", help="actor path, e.g. echo")
    send.add_argument("message", metavar="JSON", help="the message, as JSON")
    send.add_argument("--timeout", type=float, default=None, help="seconds to wait")
    send.add_argument("--tell", action="store_true", help="queue it, do not wait for a reply")
    stop = commands.add("stop", "stop the daemon gracefully", _cmd_stop)
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for exit")
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
        return EXIT_ERROR


def _quiet_logging(args: argparse.Namespace) -> None:
    """Client commands log only warnings, to stderr, for humans (the daemon reconfigures)."""
    if args.command == "daemon":
        return
    from phloem.logs import configure_logging

    configure_logging("warning", "console")


if __name__ == "__main__":
    sys.exit(main())
