"""The built-in commands: daemon, config check, status, tree, top, send, stop."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.limits import RangeError, RangeTypeError, check_range
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    pass

from phloem.cli.commands import EXIT_OK, CommandContext, Commands, UsageError, to_json
from phloem.cli.render import render_status, render_table, render_tree

DEFAULT_TOP_INTERVAL_S = 1.0
TOP_INTERVAL_RANGE = (0.05, 3600.0)


def add_cli(commands: Commands) -> None:
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


def _cmd_daemon(ctx: CommandContext) -> int:
    from phloem.config import load_config
    from phloem.daemon.server import run

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
    iterations = ctx.args.iterations
    try:
        check_range("interval", interval, *TOP_INTERVAL_RANGE, integer=False)
        if iterations is not None:
            check_range("iterations", iterations, 1, None)
    except (RangeError, RangeTypeError) as exc:
        raise UsageError(exc.message) from None
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
    from phloem.client.socket import SocketTransport

    with ctx.client() as client:
        pid = client.status().pid
        client.stop_daemon()
        transport = client.transport
        stopped = isinstance(transport, SocketTransport) and transport.wait_closed(ctx.args.timeout)
    if not stopped:
        raise PhloemError(ErrorKind.TIMEOUT, f"the daemon (pid {pid}) did not stop in time")
    ctx.emit({"stopped": True, "pid": pid}, text=f"phloem daemon (pid {pid}) stopped")
    return EXIT_OK
