"""The `[sessions]` configuration section (gathered by `phloem.config`).

    [sessions]
    dir = ""                  # empty: $XDG_STATE_HOME/phloem/sessions, else ~/.local/state/...
    default_agent = "coder"

    [sessions.agents.coder]
    provider = "flash"        # a [providers.NAME] entry; its key is read at the first call
    context_tokens = 0        # > 0 turns compaction on

`[sessions.agents.NAME]` declares a harness agent: an `LlmAgent` on a configured provider
with the coding tools on the session's workspace. `instruction` replaces the built-in
base instruction; `tools` picks coding tools by name (default: all seven).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import msgspec

from phloem.base.settings import Section

_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
AgentName = Annotated[str, msgspec.Meta(pattern=_NAME)]
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]
ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")]

DEFAULT_MAX_TOOL_ROUNDS = 50
DEFAULT_MAX_CONCURRENT_RUNS = 64
DEFAULT_MAX_EVENTS = 100_000
DEFAULT_MAX_PROMPT_CHARS = 200_000


class HarnessAgentConfig(Section, kw_only=True):
    """`[sessions.agents.NAME]`: one harness agent."""

    provider: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    description: str = ""
    # Empty: the built-in coding-agent instruction (phloem.actors.sessions.harness).
    instruction: str = ""
    # Coding tools by name; None: read, write, edit, bash, grep, find, ls.
    tools: list[str] | None = None
    max_tool_rounds: Annotated[int, msgspec.Meta(ge=1, le=100)] = DEFAULT_MAX_TOOL_ROUNDS
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None
    # Compaction (plasmid §4): off unless context_tokens > 0.
    context_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000_000)] = 0
    trigger_fraction: Fraction = 0.85
    target_fraction: Fraction = 0.60
    keep_recent_contents: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 12
    minimum_elision_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000_000)] = 200
    preserve_tool_names: list[str] = []
    calibration: bool = True
    # Instructions, skills, templates and tool policy (phloem.instructions): the
    # workspace's instruction files, its skills as list_skills / load_skill, prompt
    # commands (`/name args`); a tool policy (denials win) and confirmation of mutating tools.
    instructions: bool = True
    skills: bool = True
    templates: bool = True
    tools_allow: list[ToolName] | None = None
    tools_deny: list[ToolName] = []
    confirmation: bool = False
    confirmation_timeout_s: Annotated[float, msgspec.Meta(ge=0.01, le=3_600)] = 60.0


class SessionsConfig(Section, kw_only=True):
    """`[sessions]`: the durable session store and the harness agents."""

    dir: str = ""
    fsync: bool = True
    app: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] = "phloem"
    user: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] = "user"
    default_agent: AgentName = "coder"
    # Workspace of a session created without one; empty: the daemon's working directory.
    workdir: str = ""
    agents: dict[AgentName, HarnessAgentConfig] = {}
    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = DEFAULT_MAX_CONCURRENT_RUNS
    max_events: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] = DEFAULT_MAX_EVENTS
    max_prompt_chars: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] = DEFAULT_MAX_PROMPT_CHARS

    def store_dir(self) -> Path:
        """`dir`, else `$XDG_STATE_HOME/phloem/sessions`, else `~/.local/state/phloem/sessions`."""
        if self.dir:
            return Path(self.dir).expanduser()
        state = os.environ.get("XDG_STATE_HOME")
        base = Path(state) if state else Path.home() / ".local" / "state"
        return base / "phloem" / "sessions"
