"""The instruction contexts of a tree's sessions, kept from one turn to the next.

A session keeps one `InstructionContext` for as long as the daemon runs (at most
`MAX_SESSIONS`, the least recently used forgotten first), so instructions activated by one
turn's tool calls stay active in the next; after a restart they are discovered again.
Its skills and templates are snapshotted at its first turn and kept the same way (plasmid:
each session gets an immutable extension catalog): a skill added or edited later does not
change the session's tools mid-conversation — a new session (or a restart) sees it. The
context's warnings (discovery, templates, skills) are the session's, returned with the next
turn's `AskResult.warnings`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from phloem.instructions.discovery import InstructionContext
from phloem.instructions.settings import InstructionsConfig
from phloem.instructions.skills import SkillCatalog
from phloem.instructions.templates import TemplateCatalog
from phloem.protocols.warnings import Warnings
from phloem.tools.settings import ToolsConfig

__all__ = ["MAX_SESSIONS", "SessionContexts"]

MAX_SESSIONS = 1_024


class SessionContexts:
    """Per-session instruction contexts (thread-safe)."""

    def __init__(
        self, config: InstructionsConfig | None = None, tools: ToolsConfig | None = None
    ) -> None:
        self.config = config or InstructionsConfig()
        self.tools = tools
        self._lock = threading.Lock()
        self._contexts: OrderedDict[tuple[str, str], InstructionContext] = OrderedDict()
        self._catalogs: OrderedDict[tuple[str, str, str], SkillCatalog | TemplateCatalog] = (
            OrderedDict()
        )

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

    def skills(self, session_id: str, workdir: str, warnings: Warnings) -> SkillCatalog:
        """The session's skill snapshot (taken now if it has none); its later warnings
        (prompt commands of a loaded skill) go to `warnings`, this turn's."""
        catalog = self._catalog("skills", session_id, workdir, warnings)
        assert isinstance(catalog, SkillCatalog)
        return catalog

    def templates(self, session_id: str, workdir: str, warnings: Warnings) -> TemplateCatalog:
        """The session's template snapshot, as `skills`."""
        catalog = self._catalog("templates", session_id, workdir, warnings)
        assert isinstance(catalog, TemplateCatalog)
        return catalog

    def _catalog(
        self, kind: str, session_id: str, workdir: str, warnings: Warnings
    ) -> SkillCatalog | TemplateCatalog:
        key = (kind, session_id, os.path.realpath(workdir))
        with self._lock:
            catalog = self._catalogs.get(key)
            if catalog is None:
                make = SkillCatalog if kind == "skills" else TemplateCatalog
                catalog = make(self.config, workdir, warnings=warnings, tools=self.tools)
                self._catalogs[key] = catalog
            catalog.warnings = warnings
            self._catalogs.move_to_end(key)
            while len(self._catalogs) > 2 * MAX_SESSIONS:
                self._catalogs.popitem(last=False)
            return catalog

    def forget(self, session_id: str) -> None:
        with self._lock:
            for key in [k for k in self._contexts if k[0] == session_id]:
                del self._contexts[key]
            for kind_key in [k for k in self._catalogs if k[1] == session_id]:
                del self._catalogs[kind_key]
