"""Front matter: the YAML header (`---` ... `---`) of instruction, skill and template files.

`split_front_matter(text)` returns the header as a dict and the body. The header is YAML
(parsed with PyYAML's safe loader, at most `MAX_FRONT_MATTER_BYTES`); a header that does
not parse, or is not a mapping, is reported (`FrontMatterError`) and the file is then read
as if it had none. `tool_names(value)` reads a tool list the way other agents write it —
a YAML list or one comma/space separated string — and maps host tool names (`Read`,
`Glob`, `LS`, `MultiEdit`, ...) to phloem's (`read`, `find`, `ls`, `edit`).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_FRONT_MATTER_BYTES",
    "FrontMatterError",
    "ToolList",
    "canonical_tool",
    "split_front_matter",
    "tool_names",
]

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_TOOL_NAMES = 256

_OPEN = re.compile(r"\A\ufeff?---[ \t]*\r?\n")
_CLOSE = re.compile(r"^---[ \t]*\r?$\n?", re.MULTILINE)
_SCOPED = re.compile(r"^([A-Za-z_][A-Za-z0-9_.:-]*)\s*\((.*)\)$", re.DOTALL)

# Names other agents use for the coding tools, lower-cased.
HOST_TOOL_NAMES = {
    "read": "read",
    "view": "read",
    "write": "write",
    "edit": "edit",
    "multiedit": "edit",
    "bash": "bash",
    "shell": "bash",
    "grep": "grep",
    "search": "grep",
    "glob": "find",
    "find": "find",
    "ls": "ls",
}


class FrontMatterError(ValueError):
    """The header could not be read; `line` is where the problem is (1-based)."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


def split_front_matter(text: str) -> tuple[dict[str, Any], str, FrontMatterError | None]:
    """`(header, body, problem)`: without a header `({}, text, None)`; with a broken one
    `({}, text, error)` so the caller can warn and go on."""
    opening = _OPEN.match(text)
    if opening is None:
        return {}, text, None
    closing = _CLOSE.search(text, opening.end())
    if closing is None:
        return {}, text, FrontMatterError("front matter has no closing ---")
    raw = text[opening.end() : closing.start()]
    if len(raw.encode()) > MAX_FRONT_MATTER_BYTES:
        return {}, text, FrontMatterError(f"front matter over {MAX_FRONT_MATTER_BYTES} bytes")
    import yaml  # loaded by the first front matter read, not with the instructions

    try:
        header = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = 2 + mark.line if mark is not None else 1
        problem = getattr(exc, "problem", None) or "invalid YAML"
        return {}, text, FrontMatterError(f"front matter is not valid YAML: {problem}", line)
    if header is None:
        header = {}
    if not isinstance(header, dict):
        return {}, text, FrontMatterError("front matter must be a mapping")
    return {str(k): v for k, v in header.items()}, text[closing.end() :], None


class ToolList:
    """A tool list read from front matter: plain names, argument-scoped names
    (`Bash(git:*)` → `bash`) and the entries that were not tool names at all."""

    __slots__ = ("bad", "names", "scoped")

    def __init__(self, names: frozenset[str], scoped: frozenset[str], bad: list[str]) -> None:
        self.names = names
        self.scoped = scoped
        self.bad = bad


def tool_names(value: Any) -> ToolList | None:
    """The tool list in a front-matter value; `None` when it is absent (no restriction).

    A YAML list or one comma/space separated string; an explicit empty list stays empty
    (no tool at all). At most `MAX_TOOL_NAMES` entries are read.
    """
    if value is None:
        return None
    if isinstance(value, str):
        items: list[Any] = [p for p in re.split(r"[,\s]+(?![^()]*\))", value) if p]
    elif isinstance(value, list):
        items = value
    else:
        return ToolList(frozenset(), frozenset(), [repr(value)[:80]])
    names: set[str] = set()
    scoped: set[str] = set()
    bad: list[str] = []
    for item in items[:MAX_TOOL_NAMES]:
        if not isinstance(item, str) or not item.strip():
            bad.append(repr(item)[:80])
            continue
        entry = item.strip()
        match = _SCOPED.match(entry)
        if match is not None:
            scoped.add(canonical_tool(match.group(1)))
        else:
            names.add(canonical_tool(entry))
    return ToolList(frozenset(names), frozenset(scoped - names), bad)


def canonical_tool(name: str) -> str:
    """phloem's name for a host's tool name (`Glob` → `find`); others unchanged."""
    return HOST_TOOL_NAMES.get(name.lower(), name)
