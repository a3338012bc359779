"""Structural JSON comparison that names the first difference.

Key order and number spelling (1 vs 1.0) do not matter; `null` and `[]` differ, and so do
`true` and `1`.
"""

from __future__ import annotations

import json
from typing import Any

MAX_SHOWN_CHARS = 160


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) > MAX_SHOWN_CHARS:
        text = text[: MAX_SHOWN_CHARS - 3] + "..."
    return text


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def first_difference(expected: Any, actual: Any, path: str = "$") -> str | None:
    """None when equal; otherwise `path: expected X, got Y` for the first difference."""
    kind = _kind(expected)
    if kind != _kind(actual):
        return f"{path}: expected {_show(expected)}, got {_show(actual)}"
    if kind == "object":
        for key in sorted(set(expected) | set(actual)):
            where = f"{path}.{key}"
            if key not in actual:
                return f"{where}: missing (expected {_show(expected[key])})"
            if key not in expected:
                return f"{where}: unexpected {_show(actual[key])}"
            found = first_difference(expected[key], actual[key], where)
            if found:
                return found
        return None
    if kind == "array":
        for index, (want, have) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(want, have, f"{path}[{index}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        return None
    if expected != actual:
        return f"{path}: expected {_show(expected)}, got {_show(actual)}"
    return None


def substitute(value: Any, replacements: dict[str, str]) -> Any:
    """Replace placeholder text inside every string of a JSON value."""
    if isinstance(value, str):
        for old, new in replacements.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [substitute(item, replacements) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, replacements) for key, item in value.items()}
    return value
