"""`phloem logs [PATH] [--follow] [--since DURATION]`: the daemon's recent log lines.

The daemon keeps each line it writes on stderr in a bounded ring buffer of recent lines
per child (`phloem.base.logbuffer`: `MAX_LOG_LINES_PER_CHILD` lines of at most
`MAX_LOG_LINE_BYTES` each, for `MAX_LOG_CHILDREN` children), attributed to the actor path
that made it. `phloem logs` prints those of PATH and below it (all of them without a
PATH), oldest first, one per line: `TIME LEVEL ACTOR EVENT key=value ...` (`--json`: each
line's record, one JSON object per line). `--since 5m` keeps the lines of the last five
minutes. `--follow` then prints every new line as it is logged, until Ctrl-C (exit code
130, quietly) or the daemon goes away (one line on stderr, exit code 1), as `tail -f`.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from phloem.cli.args import duration_arg
from phloem.cli.commands import EXIT_OK, CommandContext, Commands, to_json
from phloem.protocols.logs import LogLine

_PLAIN = ("event", "level", "timestamp", "actor_path")  # shown in the line's own columns


def add_cli(commands: Commands) -> None:
    p = commands.add(
        "logs", "the daemon's recent log lines, per child (tail -f with --follow)", _cmd_logs
    )
    p.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        default="",
        help="a child's tree path (its lines and those below it); all lines without it",
    )
    p.add_argument("--follow", "-f", action="store_true", help="then print new lines until Ctrl-C")
    p.add_argument(
        "--since", metavar="DURATION", help="only lines of the last DURATION (30s, 5m, 2h, 1d)"
    )


def render_line(line: LogLine) -> str:
    """`TIME LEVEL ACTOR EVENT key=value ...` for one kept line."""
    at = datetime.fromtimestamp(line.at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    fields = _fields(line.line)
    rest = " ".join(f"{k}={_value(v)}" for k, v in fields.items() if k not in _PLAIN)
    cut = f" [cut {line.cut} bytes]" if line.cut else ""
    text = f"{at} {line.level:<7} {line.actor or '-'} {line.event}"
    return f"{text} {rest}{cut}" if rest else text + cut


def _fields(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:  # cut mid-record: show it as it is
        return {"line": text}
    return value if isinstance(value, dict) else {"line": text}


def _value(value: Any) -> str:
    return value if isinstance(value, str) and " " not in value else json.dumps(value)


def _cmd_logs(ctx: CommandContext) -> int:
    since = None
    if ctx.args.since is not None:
        since = time.time() - duration_arg("since", ctx.args.since)
    with ctx.client() as client:
        if not ctx.args.follow:
            reply = client.logs(ctx.args.path, since)
            _print(ctx, reply.lines, reply.omitted)
            return EXIT_OK
        reply, stream = client.follow_logs(ctx.args.path, since)
        with stream:
            _print(ctx, reply.lines, reply.omitted)
            for line in stream:
                _print(ctx, [line], 0)
    return EXIT_OK


def _print(ctx: CommandContext, lines: list[LogLine], omitted: int) -> None:
    if omitted and not ctx.json:
        ctx.err.write(f"phloem logs: {omitted} older lines left out (narrow with --since)\n")
    for line in lines:
        ctx.out.write((to_json(line) if ctx.json else render_line(line)) + "\n")
    ctx.out.flush()
