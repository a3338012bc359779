"""Trusted components the catalogue tests name as tools."""

from __future__ import annotations

from phloem.tools.contract import FunctionTool


def find_thing(what: str) -> dict[str, str]:
    """Find a thing by name."""
    return {"found": what}


def _stamp() -> str:
    return "stamped"


STAMP = FunctionTool("stamp", _stamp, "Stamp it.")
MISNAMED = FunctionTool("y", _stamp, "A tool whose name is not its key.")
NOT_A_TOOL = 42
