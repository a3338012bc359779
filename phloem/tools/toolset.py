"""`Toolset`: tools that are known only when they are needed.

An MCP server's tools exist once it is connected, and it connects at the first need; a
`Toolset` stands for such a group. `tools()` returns the group's tools at that moment
(connecting if it must; a group that cannot be reached gives none and says why through
its own warnings). An `LlmAgent` asks its toolsets at the start of each run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from phloem.tools.contract import Tool


class Toolset(ABC):
    """A named group of tools resolved at run time."""

    name: str

    @abstractmethod
    def tools(self) -> list[Tool]:
        """The group's tools now (each follows the one tool contract)."""
