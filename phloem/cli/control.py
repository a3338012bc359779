"""`phloem start PATH`, `phloem stop PATH` and `phloem restart PATH`: one supervisor's child
at a time, in supervisorctl's words (`phloem stop` without a PATH stops the daemon).

PATH is a child's place as `phloem tree` prints it (`planning/service`, `echo`). A child
stopped by hand stays `stopped` until `phloem start` starts it, and neither that stop nor
a restart counts against its supervisor's restart intensity. An unknown path, a child
that is not running (stop) or already is (start) is one line and exit code 1.
"""

from __future__ import annotations

import argparse

from phloem.cli.commands import EXIT_OK, CommandContext, Commands, Handler

CONTROL_TIMEOUT_S = 60.0
"""How long a start, stop or restart may wait for the child's supervisor by default."""

_DONE = {"start": "started", "stop": "stopped", "restart": "restarted"}


def add_cli(commands: Commands) -> None:
    for action, help in (
        ("start", "start a stopped child of a supervisor, by its tree path"),
        ("restart", "stop a child of a supervisor (if it runs), then start it again"),
    ):
        p = commands.add(action, help, _handler(action))
        add_path(p, required=True)
        add_timeout(p)


def add_path(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The PATH argument (`phloem stop` gives it as optional)."""
    parser.add_argument(
        "path",
        metavar="PATH",
        nargs=None if required else "?",
        help="the child's tree path, as `phloem tree` prints it (e.g. planning/service)",
    )


def add_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=float,
        default=CONTROL_TIMEOUT_S,
        help="seconds to wait for the child's supervisor",
    )


def _handler(action: str) -> Handler:
    def handle(ctx: CommandContext) -> int:
        return control(ctx, action, ctx.args.timeout)

    return handle


def control(ctx: CommandContext, action: str, timeout: float) -> int:
    """Do `action` to the child at `ctx.args.path` and say what changed."""
    with ctx.client() as client:
        method = {
            "start": client.start_child,
            "stop": client.stop_child,
            "restart": client.restart_child,
        }[action]
        done = method(ctx.args.path, timeout=timeout)
    text = f"{done.path}: {_DONE[action]}"
    if done.state == "removed":
        text += " (a dynamic child: its spec is gone)"
    elif done.pid is not None:
        text += f" (pid {done.pid})"
    ctx.emit(done, text=text)
    return EXIT_OK
