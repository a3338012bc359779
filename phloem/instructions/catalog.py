"""`WorkspaceCatalog`: what the skill and template catalogs share — the workspace they
were taken for, the home directory, the prompt commands (their bash capped by the
`[tools]` section given as `tools`), and warnings that are both
collected (for `AskResult.warnings`) and logged."""

from __future__ import annotations

import abc
import os
from pathlib import Path

from phloem.base.logs import get_logger
from phloem.instructions.commands import PromptCommands
from phloem.instructions.settings import InstructionsConfig
from phloem.protocols.warnings import Warnings
from phloem.tools.settings import ToolsConfig

log = get_logger("phloem.instructions")


class WorkspaceCatalog(abc.ABC):
    """Base of the catalogs of one workspace (each a snapshot taken at construction)."""

    def __init__(
        self,
        config: InstructionsConfig | None = None,
        workdir: str | os.PathLike[str] | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
        warnings: Warnings | None = None,
        tools: ToolsConfig | None = None,
    ) -> None:
        self.config = config or InstructionsConfig()
        self.workdir = os.path.realpath(os.fspath(workdir)) if workdir is not None else None
        self.home = os.path.realpath(os.fspath(home) if home is not None else str(Path.home()))
        self.warnings = warnings if warnings is not None else Warnings()
        self.commands = PromptCommands(self.config, self.workdir, self.warn, tools)
        self._load()

    @abc.abstractmethod
    def _load(self) -> None:
        """Read the catalog's roots (each subclass its own); called by `__init__`."""

    def warn(
        self, code: str, message: str, *, path: str | None = None, line: int | None = None
    ) -> None:
        """Collect one warning (bounded, redacted) and log it."""
        warning = self.warnings.warn(code, message, path=path, line=line)
        log.warning(warning.code, detail=warning.message, path=path, line=line)
