"""A FunctionAgent target for `phloem mcp serve --agents` tests."""

from __future__ import annotations


def greet(name: str) -> str:
    """A greeting for `name`."""
    return f"hello, {name}"
