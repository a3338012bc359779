"""`phloem chat`: one turn, or an interactive loop, of a durable session.

Each reply of the model is printed as soon as its event arrives; tool calls show as one
line each (`> read {"path":"README.md"}`, then `< read ok` or `< read error: ...`).
The loop opens with a banner (agent, provider and model, workspace, session id) and
takes the commands of `COMMANDS` (`/help` lists them); another `/word` is a prompt
template of the workspace when the agent has them, else a one-line hint, and `//text`
sends text that starts with a slash. Ctrl-C cancels the turn under way (the daemon stops
the model call or tool in flight); a second Ctrl-C, or Ctrl-C / Ctrl-D at the prompt,
exits. With an agent's `confirmation = true`, each mutating tool call asks
`run write {...}? [y/N]` first (`--yes` approves them all; with no terminal the answer
is no); `--allow TOOL` / `--deny TOOL` restrict the turn's tools; warnings are printed
after the turn. An agent whose provider's key variable is unset in the daemon's
environment is refused before any turn, naming the variable. `--demo` runs all of it on
an embedded tree with a scripted stand-in model (`phloem.cli.demo`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
from typing import TYPE_CHECKING, Any

from phloem.cli.commands import EXIT_ERROR, EXIT_OK, UsageError
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.actors.sessions.protocol import SessionDetail, SessionSummary
    from phloem.actors.sessions.results import AskResult
    from phloem.agents.events import Event
    from phloem.cli.commands import CommandContext
    from phloem.client.sync import Client

PROMPT = "you> "
MAX_REMEMBERED_BYTES = 512
COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_.-]*)(?:\s|$)")
"""A loop line that is a command: `/word`, then nothing or whitespace (`//` is text)."""

COMMANDS = {
    "help": "list these commands",
    "new": "start a new session (same agent and workspace)",
    "sessions": "list the sessions (* marks this one)",
    "exit": "leave (so do /quit, Ctrl-D and Ctrl-C at the prompt)",
}
ALIASES = {"quit": "exit"}


class Chat:
    """One `phloem chat` command: its session, then one turn or the loop."""

    def __init__(self, ctx: CommandContext) -> None:
        self.ctx = ctx
        self.args = ctx.args
        self.out = ctx.out
        self._streamed = False
        self.demo = bool(getattr(self.args, "demo", False))
        self.detail: SessionDetail | None = None

    def main(self) -> int:
        if self.demo:
            if self.args.session or self.args.agent:
                raise UsageError("--demo starts its own session: no --session or --agent")
            from phloem.cli.demo import chat_demo

            with chat_demo() as client:
                return self.run(client)
        with self.ctx.client() as client:
            return self.run(client)

    def run(self, client: Client) -> int:
        sid, created = self._session(client)
        self.detail = self._checked(client, sid, created)
        if self.args.prompt is not None:
            if created and not self.ctx.json:
                self.ctx.err.write(f"session {sid} (workdir {self.detail.summary.workdir})\n")
            return self._one(client, sid, self.args.prompt)
        if not self.ctx.json:
            self._banner(created)
        return self._loop(client, sid)

    # -- which session -------------------------------------------------------------------

    def _session(self, client: Client) -> tuple[str, bool]:
        """The session to talk in, and whether it is new."""
        if self.args.session:
            return str(self.args.session), False  # `_checked` shows it: unknown_session
        if not self.args.new and not self.demo:
            remembered = _read_remembered()
            if remembered is not None:
                try:
                    client.session_show(remembered, max_events=1)
                    return remembered, False
                except PhloemError as exc:
                    if exc.kind != ErrorKind.UNKNOWN_SESSION:
                        raise
        workdir = os.path.abspath(self.args.workdir or ".")
        return client.session_new(agent=self.args.agent, workdir=workdir), True

    def _checked(self, client: Client, sid: str, created: bool) -> SessionDetail:
        """The session's detail, once its agent's provider has its key (else a one-line
        `config_invalid` naming the variable, and a session made for it is deleted)."""
        detail = client.session_show(sid, max_events=1)
        env = detail.missing_key_env
        if env:
            if created:
                client.session_delete(sid)
            raise PhloemError(
                ErrorKind.CONFIG_INVALID,
                f"agent {detail.summary.agent!r} needs an API key: set {env} in the daemon's "
                f"environment and restart it (api_key_env of [providers.{detail.provider}])",
            )
        if not self.demo:
            _remember(sid)
        return detail

    def _banner(self, created: bool) -> None:
        from phloem.cli.demo import DEMO_NOTE

        assert self.detail is not None
        d, s = self.detail, self.detail.summary
        lines = [DEMO_NOTE] if self.demo else []
        lines += [
            f"agent      {s.agent} (provider {d.provider or '-'}, model {d.model or '-'})",
            f"workspace  {s.workdir}",
            _session_line(s.id, created),
            "/help lists the commands; Ctrl-D leaves",
        ]
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()

    # -- turns ---------------------------------------------------------------------------

    def _one(self, client: Client, sid: str, prompt: str) -> int:
        try:
            result = self._turn(client, sid, prompt)
        except KeyboardInterrupt:
            client.session_cancel(sid)
            self.ctx.err.write("cancelled\n")
            return EXIT_ERROR
        return EXIT_OK if result.ok else EXIT_ERROR

    def _loop(self, client: Client, sid: str) -> int:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401 - line editing and history for input()
        while True:
            try:
                line = input(PROMPT)
            except (EOFError, KeyboardInterrupt):
                self.out.write("\n")
                return EXIT_OK
            prompt = line.strip()
            if not prompt:
                continue
            command = COMMAND.match(prompt)
            if command is not None:
                word = ALIASES.get(command.group(1), command.group(1))
                if word == "exit":
                    return EXIT_OK
                if word in COMMANDS:
                    sid = self._command(client, sid, word)
                    continue
                if not (self.detail is not None and self.detail.templates):
                    self._say(_unknown(word, templates=False))
                    continue
            elif prompt.startswith("//") and not (self.detail and self.detail.templates):
                prompt = prompt[1:]  # without templates nothing else reads the escape
            try:
                self._turn(client, sid, prompt)
            except KeyboardInterrupt:
                if not self._cancel(client, sid):
                    return EXIT_ERROR
            except PhloemError as exc:
                if exc.kind != ErrorKind.UNKNOWN_TEMPLATE or command is None:
                    raise
                self._say(_unknown(command.group(1), templates=True))

    def _command(self, client: Client, sid: str, word: str) -> str:
        """Run the chat command `word`; the session the loop goes on in."""
        if word == "help":
            width = max(map(len, COMMANDS)) + 1
            lines = [f"/{name:<{width}} {what}" for name, what in COMMANDS.items()]
            if self.detail is not None and self.detail.templates:
                lines.append(f"/{'NAME':<{width}} a prompt template of the workspace")
            lines.append(f"//{'text':<{width - 1}} text that starts with a slash")
            lines.append("Ctrl-C cancels the turn under way.")
            self._say("\n".join(lines))
        elif word == "new":
            assert self.detail is not None
            s = self.detail.summary
            sid = client.session_new(agent=s.agent, workdir=s.workdir)
            self.detail = self._checked(client, sid, True)
            self._say(_session_line(sid, True))
        elif word == "sessions":
            rows = [("* " if s.id == sid else "  ") + session_row(s) for s in client.session_list()]
            self._say("\n".join(rows) or "(no sessions)")
        return sid

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _cancel(self, client: Client, sid: str) -> bool:
        """Cancel the turn under way; False when a second Ctrl-C asks to leave."""
        self.ctx.err.write("\ncancelling the turn (Ctrl-C again to exit)\n")
        try:
            client.session_cancel(sid)
            self._wait_idle(client, sid)
        except KeyboardInterrupt:
            return False
        return True

    @staticmethod
    def _wait_idle(client: Client, sid: str) -> None:
        import time

        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if not client.session_show(sid, max_events=1).summary.busy:
                return
            time.sleep(0.05)

    def _turn(self, client: Client, sid: str, prompt: str) -> AskResult:
        from phloem.cli.instructions import confirm_prompt

        show = None if self.ctx.json else self._show
        result = client.session_run(
            sid,
            prompt,
            on_event=show,
            timeout=self.args.timeout,
            on_confirm=confirm_prompt(self.ctx, approve_all=self.args.yes),
            tools_allow=self.args.allow,
            tools_deny=self.args.deny,
        )
        if self.ctx.json:
            self.ctx.emit(result)
        else:
            for warning in result.warnings:
                self.ctx.err.write(f"warning: {warning.render()}\n")
            if not result.ok and result.error is not None:
                self.ctx.err.write(
                    f"turn {result.status}: {result.error.message} [{result.error.kind}]\n"
                )
        return result

    def _show(self, event: Event) -> None:
        if event.partial:  # a piece of the reply, as the model streams it
            self.out.write(event.text)
            self.out.flush()
            self._streamed = True
            return
        streamed, self._streamed = self._streamed, False
        if streamed:
            self.out.write("\n")
        if event.author == "user" or event.content is None:
            if event.error is not None:
                self.out.write(f"! {event.error.kind}: {event.error.message}\n")
            return
        from phloem.protocols.content import function_responses_of

        for call in event.content.function_calls:
            self.out.write(f"> {call.name} {compact_args(dict(call.args))}\n")
        for response in function_responses_of(event.content.parts):
            self.out.write(f"< {response.name} {_status(response.response)}\n")
        text = event.content.text if event.content.role == "model" and not streamed else ""
        if text:
            self.out.write(text.rstrip("\n") + "\n")
        self.out.flush()


def compact_args(args: dict[str, Any], limit: int = 60) -> str:
    """A tool call's arguments on one short line."""
    text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def remembered_path() -> str:
    """Where `chat` remembers the session it used last from this directory."""
    return os.path.join(os.getcwd(), ".phloem", "chat-session")


def when(ts: float) -> str:
    """A time as listings show it (local time, to the second)."""
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def session_row(s: SessionSummary) -> str:
    """One session on one line, as `session list` and chat's `/sessions` show it."""
    busy = "  [running]" if s.busy else ""
    return f"{s.id}  {s.agent:<10} {when(s.updated)}  {s.workdir}{busy}"


def _session_line(sid: str, created: bool) -> str:
    return f"session    {sid}" + (" (new)" if created else "")


def _unknown(word: str, *, templates: bool) -> str:
    """The hint for a `/word` that is no command (the loop goes on)."""
    what = "neither a chat command nor a prompt template" if templates else "not a chat command"
    return f"/{word} is {what}: /help lists the commands (//{word} sends it as text)"


def _status(response: Any) -> str:
    if isinstance(response, dict) and "error" in response:
        return f"error: {response['error']}"
    return "ok"


def _read_remembered() -> str | None:
    try:
        with open(remembered_path(), encoding="utf-8") as handle:
            text = handle.read(MAX_REMEMBERED_BYTES).strip()
    except OSError:
        return None
    return text or None


def _remember(sid: str) -> None:
    path = remembered_path()
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(sid + "\n")


__all__ = ["Chat"]
