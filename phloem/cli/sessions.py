"""`phloem session list | show ID | delete ID` and `phloem chat`: durable sessions.

    phloem chat --new "explain this repository"      # a new session on the default agent
    phloem chat --session ID "and the tests?"        # one more turn of a session
    phloem chat                                      # an interactive loop (history kept)
    phloem chat --demo                               # the same on a scripted stand-in
    phloem session list

`chat` streams the answer's text as it arrives and shows tool calls compactly; in the
loop (see `phloem.cli.chat`: a banner, `/help`, `/new`, `/sessions`, `/exit`), Ctrl-C
cancels the turn under way and a second Ctrl-C (or Ctrl-D) exits. Without `--session` or
`--new` it continues the session it used last from this directory
(`.phloem/chat-session`), else starts one. Exit status 0 when the turn is done, 1 when it
failed or was cancelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from phloem.cli.commands import CommandContext, Commands


def add_cli(commands: Commands) -> None:
    group = commands.group("session", "list, show and delete durable sessions")
    group.add("list", "list the daemon's sessions", _list)
    show = group.add("show", "show one session: its summary and last events", _show)
    show.add_argument("id")
    show.add_argument("--events", type=int, default=20, metavar="N", help="last N events")
    delete = group.add("delete", "delete a session and its transcript", _delete)
    delete.add_argument("id")
    chat = commands.add("chat", "talk to a coding agent in a durable session", _chat)
    chat.add_argument("prompt", nargs="?", help="one turn; without it, an interactive loop")
    which = chat.add_mutually_exclusive_group()
    which.add_argument("--session", metavar="ID", help="continue this session")
    which.add_argument("--new", action="store_true", help="start a new session")
    chat.add_argument(
        "--agent", metavar="NAME", help="the agent of a new session (an [agents.llm.NAME])"
    )
    chat.add_argument("--workdir", metavar="DIR", help="workspace of a new session (default .)")
    chat.add_argument("--timeout", type=float, default=None, metavar="S", help="per turn")
    chat.add_argument("--allow", metavar="TOOL", action="append", default=None, help="only these")
    chat.add_argument("--deny", metavar="TOOL", action="append", default=[], help="never these")
    chat.add_argument(
        "--yes", action="store_true", help="approve every tool call that asks for confirmation"
    )
    chat.add_argument(
        "--demo",
        action="store_true",
        help="no daemon, no key: an embedded tree with a scripted stand-in model",
    )


def _list(ctx: CommandContext) -> int:
    from phloem.cli.chat import session_row

    with ctx.client() as client:
        sessions = client.session_list()
    ctx.emit(sessions, text="\n".join(session_row(s) for s in sessions) or "(no sessions)")
    return 0


def _show(ctx: CommandContext) -> int:
    from phloem.agents.events import describe
    from phloem.cli.chat import when
    from phloem.cli.commands import UsageError

    if not 1 <= ctx.args.events <= 10_000:
        raise UsageError("--events must be 1 to 10000")
    with ctx.client() as client:
        detail = client.session_show(ctx.args.id, max_events=ctx.args.events)
    s = detail.summary
    lines = [
        f"session    {s.id}",
        f"agent      {s.agent}",
        f"workdir    {s.workdir}",
        f"created    {when(s.created)}",
        f"transcript {s.transcript}",
        f"events     {detail.event_count}",
        "",
        *(describe(e)[:300] for e in detail.events),
    ]
    ctx.emit(detail, text="\n".join(lines))
    return 0


def _delete(ctx: CommandContext) -> int:
    with ctx.client() as client:
        deleted = client.session_delete(ctx.args.id)
    ctx.emit(
        {"deleted": deleted, "id": ctx.args.id}, text="deleted" if deleted else "no such session"
    )
    return 0 if deleted else 1


def _chat(ctx: CommandContext) -> int:
    from phloem.cli.chat import Chat

    return Chat(ctx).main()
