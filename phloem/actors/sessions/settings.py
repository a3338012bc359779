"""The `[sessions]` configuration section (gathered by `phloem.config`).

    [sessions]
    dir = ""                  # empty: $XDG_STATE_HOME/phloem/sessions, else ~/.local/state/...
    default_agent = "coder"   # an [agents.llm.NAME] entry (e.g. one with harness = true)

A session's agent is an LLM agent of the one agent catalogue (`[agents.llm.NAME]`, see
`phloem.agents.settings`): its turns run it on the session's workspace.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import msgspec

from phloem.base.settings import Section

_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
AgentName = Annotated[str, msgspec.Meta(pattern=_NAME)]

DEFAULT_MAX_CONCURRENT_RUNS = 64
DEFAULT_MAX_EVENTS = 100_000
DEFAULT_MAX_PROMPT_CHARS = 200_000


class SessionsConfig(Section, kw_only=True):
    """`[sessions]`: the durable session store; a session's agent is any LLM agent of the
    catalogue (`[agents.llm.NAME]`), `default_agent` when a session names none."""

    # The store's directory; empty: $XDG_STATE_HOME/phloem/sessions, else
    # ~/.local/state/phloem/sessions.
    dir: str = ""
    # fdatasync every append and fsync the directory after each create, rename, unlink.
    fsync: bool = True
    # The app the sessions belong to: the store's subdirectory and the scope of `app:` state.
    app: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] = "phloem"
    # The user of the sessions the daemon creates: the scope of `user:` state.
    user: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] = "user"
    default_agent: AgentName = "coder"  # the `[agents.llm.NAME]` of a session that names none
    # Workspace of a session created without one; empty: the daemon's working directory.
    workdir: str = ""
    # Session turns running at once; one more is refused with `backpressure`.
    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = DEFAULT_MAX_CONCURRENT_RUNS
    # Events one session keeps; appending one more is `limit_exceeded`.
    max_events: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] = DEFAULT_MAX_EVENTS
    # Longest prompt of one turn; a longer one is `invalid_argument`.
    max_prompt_chars: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] = DEFAULT_MAX_PROMPT_CHARS

    def store_dir(self) -> Path:
        """`dir`, else `$XDG_STATE_HOME/phloem/sessions`, else `~/.local/state/phloem/sessions`."""
        if self.dir:
            return Path(self.dir).expanduser()
        state = os.environ.get("XDG_STATE_HOME")
        base = Path(state) if state else Path.home() / ".local" / "state"
        return base / "phloem" / "sessions"
