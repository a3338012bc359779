"""`Toolset`: tools that are known only when they are needed.

An MCP server's tools exist once it is connected, and it connects at the first need; a
`Toolset` stands for such a group. `tools()` returns the group's tools at that moment
(connecting if it must; a group that cannot be reached gives none and says why through
its own warnings). An `LlmAgent` asks its toolsets at the start of each run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Protocol

from phloem.tools.contract import Tool


class Toolset(ABC):
    """A named group of tools resolved at run time."""

    name: str

    @abstractmethod
    def tools(self) -> list[Tool]:
        """The group's tools now (each follows the one tool contract)."""


class ToolSource(Protocol):
    """Tools served from elsewhere by named servers (the tree's MCP hub): `tools(names)`
    connects the named servers at this first need (None: every configured server)."""

    def tools(self, names: Sequence[str] | None = None) -> Sequence[Tool]: ...


class ToolDecorator(Protocol):
    """Wraps a tool with something the tree adds to it (the LSP hub: diagnostics after
    `write` and `edit`); a tool it has nothing for comes back as it is."""

    def decorate(self, tool: Tool) -> Tool: ...

    def status(self, root: str) -> str | None:
        """One line for the prompt of an agent on workspace `root` (the LSP hub: `LSP:
        none detected`, or the sorted ids of the servers started there); None: nothing."""
        ...


class SourceToolset(Toolset):
    """The tools of some named servers of a `ToolSource`, found at each run (the source is
    read through `source()` then, so a tree whose hub starts later still serves them)."""

    def __init__(
        self, kind: str, source: Callable[[], ToolSource | None], servers: Sequence[str]
    ) -> None:
        self.name = f"{kind}:" + ",".join(servers)
        self.servers = list(servers)
        self._source = source

    def tools(self) -> list[Tool]:
        source = self._source()
        return list(source.tools(self.servers)) if source is not None else []
