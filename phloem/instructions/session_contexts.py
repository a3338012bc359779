"""The instruction contexts of a tree's sessions, kept from one turn to the next.

A session keeps one `InstructionContext` for as long as the daemon runs (at most
`MAX_SESSIONS`, the least recently used forgotten first), so instructions activated by one
turn's tool calls stay active in the next; after a restart they are discovered again.
Skills and templates are read afresh for every turn (so a new skill is there at the next
turn). The context's warnings (discovery, templates, skills) are the session's, returned
with the next turn's `AskResult.warnings`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from phloem.instructions.discovery import InstructionContext
from phloem.instructions.settings import InstructionsConfig

__all__ = ["MAX_SESSIONS", "SessionContexts"]

MAX_SESSIONS = 1_024


class SessionContexts:
    """Per-session instruction contexts (thread-safe)."""

    def __init__(self, config: InstructionsConfig | None = None) -> None:
        self.config = config or InstructionsConfig()
        self._lock = threading.Lock()
        self._contexts: OrderedDict[tuple[str, str], InstructionContext] = OrderedDict()

    def context(self, session_id: str, workdir: str) -> InstructionContext:
        key = (session_id, os.path.realpath(workdir))
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                context = InstructionContext(workdir, config=self.config)
                self._contexts[key] = context
            self._contexts.move_to_end(key)
            while len(self._contexts) > MAX_SESSIONS:
                self._contexts.popitem(last=False)
            return context

    def forget(self, session_id: str) -> None:
        with self._lock:
            for key in [k for k in self._contexts if k[0] == session_id]:
                del self._contexts[key]
