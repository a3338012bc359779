"""`phloem live ...`: Gemini Live sessions from the command line.

    phloem live chat --text T [--text T ...] [--model M] [--system S] [--timeout S] [--json]
    phloem live chat --demo --text T [...]     # no daemon, no key: the fake Live server
    phloem live list [--json]

`live chat` opens a session with `response_modalities = ["TEXT"]`, waits for `ready`,
sends each `--text` as one turn and prints the model's answer to it (`--json`: one
object per turn, `{"turn", "text"}`), then closes the session. It exits 1 if the session
closes early or a turn gets no answer within `--timeout`; without the API key Google's
endpoint needs, the daemon refuses the session at once, naming `[live] api_key_env`'s
variable. `--demo` talks to no daemon: an embedded tree on the fake Live server, which
echoes each turn (`phloem.cli.demo`). `live list` prints every Live session of the daemon
with its state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from phloem.cli.commands import CommandContext, Commands, UsageError
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.client.sync import Client

CHAT_WINDOW = CreditWindow(256, 8 * 1024 * 1024)
DEFAULT_TURN_TIMEOUT_S = 60.0
MAX_TURN_TIMEOUT_S = 3600.0


def add_cli(commands: Commands) -> None:
    live = commands.group("live", "Gemini Live sessions")
    chat = live.add("chat", "open a text Live session, send each --text turn, print answers", _chat)
    chat.add_argument("--text", action="append", default=[], help="one turn (repeatable)")
    chat.add_argument("--model", default=None, help="model name (default: [live] model)")
    chat.add_argument("--system", default=None, help="system instruction")
    chat.add_argument(
        "--timeout", type=float, default=DEFAULT_TURN_TIMEOUT_S, help="seconds per turn"
    )
    chat.add_argument(
        "--demo", action="store_true", help="no daemon, no key: an embedded fake Live server"
    )
    live.add("list", "list the daemon's Live sessions with their state", _list)


def _chat(ctx: CommandContext) -> int:
    args = ctx.args
    if not args.text:
        raise UsageError("live chat needs at least one --text")
    if not 0 < args.timeout <= MAX_TURN_TIMEOUT_S:
        raise UsageError(f"--timeout must be between 0 and {MAX_TURN_TIMEOUT_S:g}")
    config: dict[str, Any] = {"response_modalities": ["TEXT"]}
    if args.model:
        config["model"] = args.model
    if args.system:
        config["system_instruction"] = args.system
    if args.demo:
        from phloem.cli.demo import live_demo

        with live_demo() as client:
            return _converse(ctx, client, config)
    with ctx.client() as client:
        return _converse(ctx, client, config)


def _converse(ctx: CommandContext, client: Client, config: dict[str, Any]) -> int:
    """Open the session, send each turn once the last is answered, print the answers."""
    args = ctx.args
    ref = client.live_open(config)
    events = client.live_events(ref, CHAT_WINDOW)
    turns = list(args.text)
    answer: list[str] = []
    number = 0
    while True:
        event = events.recv(args.timeout)
        if event.kind == "ready" and number == 0:
            number = 1
            client.live_send(ref, text=turns[0])
        elif event.kind == "text":
            answer.append(str(event.payload.get("text", "")))
        elif event.kind == "turn_complete" and number:
            text = "".join(answer)
            ctx.emit({"turn": number, "text": text}, text=text)
            answer = []
            if number == len(turns):
                client.live_close(ref)
                return 0
            number += 1
            client.live_send(ref, text=turns[number - 1])
        elif event.kind == "closed":
            payload = event.payload
            raise PhloemError(
                ErrorKind.LIVE_SESSION_CLOSED,
                f"the session closed: {payload.get('reason')} {payload.get('detail', '')}",
            )


def _list(ctx: CommandContext) -> int:
    with ctx.client() as client:
        sessions = client.live_list()
    if ctx.json:
        ctx.emit(sessions)
        return 0
    if not sessions:
        ctx.emit(None, text="no Live sessions")
        return 0
    lines = [f"{'SESSION':>7}  {'STATE':<14} {'RECONNECTS':>10}  MODEL"]
    for s in sessions:
        lines.append(f"{s['session']:>7}  {s['state']:<14} {s['reconnects']:>10}  {s['model']}")
    ctx.emit(None, text="\n".join(lines))
    return 0
