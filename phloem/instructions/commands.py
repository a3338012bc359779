"""Prompt commands: `!`command`` in templates and skills, run before the text is used.

A template or skill body may hold inline commands (`` !`git status --short` ``) and
fenced command blocks (a code fence whose info string is `!`); each is replaced by the
command's standard output when the document is expanded. Whether anything runs is
`[instructions] prompt_commands`:

- `off`: never; the directives stay as text (with a `prompt_command_skipped` warning);
- `trusted` (the default): only for trusted documents — user-level ones, configured
  roots, and repository ones whose workspace is exactly a `[instructions.foreign]
  trusted_roots` entry;
- `on`: always.

Commands run through the one bash tool (`phloem.tools.bash`: own process group,
stopped at its timeout, output bounded, memory capped by `[tools] bash_max_memory_bytes`),
in the workspace. Each command gets at most
`command_timeout_ms` and `command_output_bytes`; one document's commands together at
most `document_timeout_ms` and `document_output_bytes` — past them the rest are skipped
with a warning. Instruction discovery never runs commands.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from phloem.instructions.settings import InstructionsConfig
from phloem.tools.bash import BashTool
from phloem.tools.contract import ToolContext
from phloem.tools.outputlimit import OutputPolicy
from phloem.tools.settings import ToolsConfig
from phloem.tools.workspace import Workspace

__all__ = ["PromptCommands", "has_commands"]

_INLINE = re.compile(r"!`([^`\n]+)`")
_FENCED = re.compile(r"^```![ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

Warn = Callable[..., None]


def has_commands(text: str) -> bool:
    return bool(_INLINE.search(text) or _FENCED.search(text))


class PromptCommands:
    """Expands the prompt commands of one document at a time (see the module docstring)."""

    def __init__(
        self,
        config: InstructionsConfig,
        workdir: str | None,
        warn: Warn,
        tools: ToolsConfig | None = None,
    ) -> None:
        self.config = config
        self.workdir = workdir
        self.warn = warn
        memory = (tools or ToolsConfig()).bash_max_memory_bytes
        self._bash = BashTool(max_memory_bytes=memory)

    def allowed(self, trusted: bool) -> bool:
        mode = self.config.prompt_commands
        return mode == "on" or (mode == "trusted" and trusted)

    def expand(self, text: str, *, trusted: bool, shown: str) -> str:
        if not has_commands(text):
            return text
        if not self.allowed(trusted) or self.workdir is None:
            why = (
                "no workspace to run them in"
                if self.workdir is None
                else f"prompt_commands = {self.config.prompt_commands!r}"
                + ("" if trusted else " and the document is not trusted")
            )
            self.warn("prompt_command_skipped", f"commands left as text: {why}", path=shown)
            return text
        run = _DocumentRun(self, shown)
        text = _FENCED.sub(lambda m: run.output(m.group(1).strip()), text)
        return _INLINE.sub(lambda m: run.output(m.group(1).strip()).rstrip("\n"), text)


class _DocumentRun:
    """The shared time and output budget of one document's commands."""

    def __init__(self, owner: PromptCommands, shown: str) -> None:
        cfg = owner.config
        self.owner = owner
        self.shown = shown
        self.deadline = time.monotonic() + cfg.document_timeout_ms / 1000.0
        self.left = cfg.document_output_bytes

    def output(self, command: str) -> str:
        owner, cfg = self.owner, self.owner.config
        remaining_ms = int((self.deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0 or self.left <= 0:
            owner.warn(
                "prompt_command_budget",
                f"not run (document_timeout_ms {cfg.document_timeout_ms} or "
                f"document_output_bytes {cfg.document_output_bytes} used up): {command[:80]}",
                path=self.shown,
            )
            return ""
        limit = min(cfg.command_output_bytes, self.left)
        assert owner.workdir is not None
        ctx = ToolContext(
            workspace=Workspace(owner.workdir),
            session="prompt-commands",
            policy=OutputPolicy(max_bytes=limit, max_lines=0, max_line_bytes=0),
        )
        timeout_ms = min(cfg.command_timeout_ms, remaining_ms)
        result = owner._bash.run({"command": command, "timeout_ms": timeout_ms}, ctx)
        if "error" in result:
            owner.warn(
                "prompt_command_failed", f"{command[:80]}: {result['error']}", path=self.shown
            )
            return ""
        stdout = str(result.get("stdout", ""))
        if result.get("timed_out"):
            owner.warn(
                "prompt_command_failed",
                f"{command[:80]}: timed out after {timeout_ms} ms",
                path=self.shown,
            )
        elif result.get("exit_code") != 0:
            owner.warn(
                "prompt_command_failed",
                f"{command[:80]}: exit code {result.get('exit_code')}",
                path=self.shown,
            )
        self.left -= len(stdout.encode())
        return stdout
