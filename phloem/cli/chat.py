"""`phloem chat`: one turn, or an interactive loop, of a durable session.

Each reply of the model is printed as soon as its event arrives; tool calls show as one
line each (`> read {"path":"README.md"}`, then `< read ok` or `< read error: ...`).
Ctrl-C cancels the turn under way (the daemon stops the model call or tool in flight);
in the loop a second Ctrl-C, or Ctrl-C / Ctrl-D at the prompt, exits. With an agent's
`confirmation = true`, each mutating tool call asks `run write {...}? [y/N]` first
(`--yes` approves them all; with no terminal the answer is no); `--allow TOOL` /
`--deny TOOL` restrict the turn's tools; warnings are printed after the turn.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

from phloem.cli.commands import EXIT_ERROR, EXIT_OK
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.actors.sessions.results import AskResult
    from phloem.agents.events import Event
    from phloem.cli.commands import CommandContext
    from phloem.client.sync import Client

PROMPT = "you> "
MAX_REMEMBERED_BYTES = 512


class Chat:
    def __init__(self, ctx: CommandContext) -> None:
        self.ctx = ctx
        self.args = ctx.args
        self.out = ctx.out
        self._streamed = False

    def main(self) -> int:
        with self.ctx.client() as client:
            sid = self._session(client)
            if self.args.prompt is not None:
                return self._one(client, sid, self.args.prompt)
            return self._loop(client, sid)

    # -- which session -------------------------------------------------------------------

    def _session(self, client: Client) -> str:
        if self.args.session:
            client.session_show(self.args.session, max_events=1)  # unknown_session early
            _remember(self.args.session)
            return str(self.args.session)
        if not self.args.new:
            remembered = _read_remembered()
            if remembered is not None:
                try:
                    client.session_show(remembered, max_events=1)
                    return remembered
                except PhloemError as exc:
                    if exc.kind != ErrorKind.UNKNOWN_SESSION:
                        raise
        workdir = os.path.abspath(self.args.workdir or ".")
        sid = client.session_new(agent=self.args.agent, workdir=workdir)
        _remember(sid)
        if not self.ctx.json:
            self.ctx.err.write(f"session {sid} (workdir {workdir})\n")
        return sid

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
                prompt = input(PROMPT)
            except (EOFError, KeyboardInterrupt):
                self.out.write("\n")
                return EXIT_OK
            if not prompt.strip():
                continue
            if prompt.strip() in ("/exit", "/quit"):
                return EXIT_OK
            try:
                self._turn(client, sid, prompt)
            except KeyboardInterrupt:
                if not self._cancel(client, sid):
                    return EXIT_ERROR

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
