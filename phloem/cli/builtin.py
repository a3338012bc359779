"""The built-in commands: daemon, config check (and init: `configinit`), status, tree,
top, send, stop."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from phloem.base.paths import CONFIG_ENV, config_candidates
from phloem.cli import configinit
from phloem.cli.commands import EXIT_OK, CommandContext, Commands, UsageError, to_json
from phloem.cli.control import add_path, control
from phloem.cli.render import is_terminal, render_status, render_tree, status_view, tree_view
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import RangeError, RangeTypeError, check_range

if TYPE_CHECKING:
    import psutil  # `stop` only: imported by the functions that watch the daemon exit

DEFAULT_TOP_INTERVAL_S = 1.0
TOP_INTERVAL_RANGE = (0.05, 3600.0)
DEFAULT_STOP_TIMEOUT_S = 30.0
STOP_TIMEOUT_RANGE = (0.0, 86_400.0)
STOP_POLL_S = 0.02


def add_cli(commands: Commands) -> None:
    commands.add("daemon", "run the daemon in the foreground", _cmd_daemon)
    config = commands.group("config", "configuration tools")
    config.add(
        "check", "validate a config file and print it resolved (secrets masked)", _cmd_config_check
    )
    configinit.add_cli(config)  # `config init`
    commands.add("status", "one-screen summary of the daemon", _cmd_status)
    commands.add("tree", "the supervision tree", _cmd_tree)
    top = commands.add(
        "top",
        "live view of every actor until q or Ctrl-C (keys: m c r n t sort, / filters)",
        _cmd_top,
    )
    top.add_argument(
        "--interval", type=float, default=DEFAULT_TOP_INTERVAL_S, help="seconds between refreshes"
    )
    top.add_argument("--iterations", type=int, default=None, help="stop after N refreshes")
    send = commands.add("send", "ask a named actor and print its reply", _cmd_send)
    send.add_argument("actor", metavar="ACTOR", help="actor path, e.g. echo")
    send.add_argument("message", metavar="JSON", help="the message, as JSON")
    send.add_argument("--timeout", type=float, default=None, help="seconds to wait")
    send.add_argument("--tell", action="store_true", help="queue it, do not wait for a reply")
    stop = commands.add("stop", "stop the daemon gracefully, or one child by its PATH", _cmd_stop)
    add_path(stop, required=False)
    stop.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_STOP_TIMEOUT_S,
        help="seconds to wait for the daemon's process to exit (else exit code 1), or for"
        " the child's supervisor",
    )


def _cmd_daemon(ctx: CommandContext) -> int:
    import setproctitle

    from phloem.config import load_config
    from phloem.daemon.server import DAEMON_TITLE, run, with_socket

    setproctitle.setproctitle(DAEMON_TITLE)  # what `ps` calls this process from now on

    path = ctx.config_path()
    config = load_config(path, load_components=True)
    try:
        config = with_socket(config, ctx.args.socket)
    except PhloemError as exc:
        raise UsageError(exc.message) from None
    return run(config, config_path=path, socket_path=ctx.args.socket)


def _cmd_config_check(ctx: CommandContext) -> int:
    """Validate the config file the search order finds (none found is an error, not a
    check of the defaults): keys and values, every component imported, every name that
    must name something configured (`check_references`)."""
    from phloem.config import load_config, resolved, to_toml

    path = ctx.config_path()
    if path is None:
        looked = ", ".join(str(p) for p in config_candidates())
        raise PhloemError(
            ErrorKind.CONFIG_INVALID,
            f"no config file to check: no --config, no ${CONFIG_ENV}, and none of {looked}",
        )
    config = load_config(path, load_components=True)
    data = resolved(config)
    ctx.emit(data, text=to_toml(data))
    return EXIT_OK


def _cmd_status(ctx: CommandContext) -> int:
    with ctx.client() as client:
        status = client.status()
    if not ctx.json and is_terminal(ctx.out):
        from phloem.cli.screen import print_view  # rich: on a terminal only

        print_view(ctx.out, status_view(status))
        return EXIT_OK
    ctx.emit(status, text=render_status(status))
    return EXIT_OK


def _cmd_tree(ctx: CommandContext) -> int:
    with ctx.client() as client:
        snap = client.tree()
    if not ctx.json and is_terminal(ctx.out):
        from phloem.cli.screen import print_view

        print_view(ctx.out, tree_view(snap))
        return EXIT_OK
    ctx.emit(snap, text=render_tree(snap))
    return EXIT_OK


def _cmd_top(ctx: CommandContext) -> int:
    """Refresh until Ctrl-C (exit 130, from `main`) or `--iterations`: one screen redrawn
    in place on a terminal, with keys (`phloem.cli.topscreen`; `q` quits, exit 0), a
    plain snapshot per refresh when piped (CPU% from the second on), JSON lines with
    --json."""
    interval = ctx.args.interval
    iterations = ctx.args.iterations
    try:
        check_range("interval", interval, *TOP_INTERVAL_RANGE, integer=False)
        if iterations is not None:
            check_range("iterations", iterations, 1, None)
    except (RangeError, RangeTypeError) as exc:
        raise UsageError(exc.message) from None
    with ctx.client() as client:
        if ctx.json:
            for status, snap in _top_frames(client, interval, iterations):
                ctx.out.write(to_json({"status": status, "tree": snap}) + "\n")
                ctx.out.flush()
        elif is_terminal(ctx.out):
            from phloem.cli.screen import console_for
            from phloem.cli.topscreen import run_top

            run_top(client, console_for(ctx.out), interval, iterations)
        else:
            from phloem.cli.rows import plain
            from phloem.cli.top import PLAIN_WIDTH, top_view

            previous = None
            for n, (status, snap) in enumerate(_top_frames(client, interval, iterations)):
                ctx.out.write("\n" * bool(n) + render_status(status) + "\n\n")
                ctx.out.write(plain(top_view(snap, previous), PLAIN_WIDTH) + "\n")
                ctx.out.flush()
                previous = snap
    return EXIT_OK


def _top_frames(client: Any, interval: float, iterations: int | None) -> Iterator[Any]:
    """(status, tree) every `interval` seconds, `iterations` times (None: until Ctrl-C)."""
    count = 0
    while True:
        yield client.status(), client.tree()
        count += 1
        if iterations is not None and count >= iterations:
            return
        time.sleep(interval)


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
    """Ask the daemon to stop, then wait for its process to exit: "stopped" is said only
    once the pid (read from `status()` before asking) is gone; otherwise exit 1."""
    timeout = ctx.args.timeout
    try:
        check_range("timeout", timeout, *STOP_TIMEOUT_RANGE, integer=False)
    except (RangeError, RangeTypeError) as exc:
        raise UsageError(exc.message) from None
    if ctx.args.path:
        return control(ctx, "stop", timeout)
    with ctx.client() as client:
        pid = client.status().pid
        process = _local_process(pid)
        client.stop_daemon()
    if process is None:
        raise PhloemError(
            ErrorKind.UNSUPPORTED,
            f"asked the daemon (pid {pid}) to stop, but no such process is visible from"
            " here (another pid namespace?), so its exit cannot be confirmed",
        )
    if not _wait_exit(process, timeout):
        raise PhloemError(
            ErrorKind.TIMEOUT,
            f"the daemon (pid {pid}) did not exit within {timeout:g} s of being asked to stop",
        )
    ctx.emit({"stopped": True, "pid": pid}, text=f"phloem daemon (pid {pid}) stopped")
    return EXIT_OK


def _local_process(pid: int) -> psutil.Process | None:
    """The daemon's process as seen from here (its start time guards against pid reuse)."""
    import psutil

    try:
        return psutil.Process(pid)
    except (psutil.NoSuchProcess, ValueError):
        return None


def _exited(process: psutil.Process) -> bool:
    import psutil

    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # ZombieProcess included
        return True
    except psutil.AccessDenied:
        return False


def _wait_exit(process: psutil.Process, timeout: float) -> bool:
    """Poll until `process` has exited (a zombie counts: it is only waiting to be reaped);
    False if it is still running after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not _exited(process):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(STOP_POLL_S, left))
    return True
