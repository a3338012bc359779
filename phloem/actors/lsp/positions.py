"""LSP positions to code-point columns.

A language server counts a line's `character` in the position encoding negotiated at
`initialize`: UTF-16 code units unless the server chose otherwise (phloem offers
`utf-8`, `utf-32` and `utf-16`, in that order). Diagnostics are shown to the model with
columns in code points of the file's text, so `s = "😀😀"; import os` puts `os` at
column 18 whichever encoding the server used.
"""

from __future__ import annotations

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"
OFFERED = (UTF8, UTF32, UTF16)
"""The position encodings phloem offers a server, most preferred first."""


def negotiated(result: object) -> str:
    """The position encoding an `initialize` result names (absent or unknown: UTF-16,
    the protocol's default)."""
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    chosen = capabilities.get("positionEncoding") if isinstance(capabilities, dict) else None
    return chosen if chosen in OFFERED else UTF16


def code_points(line: str, character: int, encoding: str) -> int:
    """The code-point offset in `line` of a position `character` units in (clamped to
    the line's end; a unit count that splits a character counts that character)."""
    if encoding == UTF32:
        return min(max(character, 0), len(line))
    units = 0
    for index, char in enumerate(line):
        if units >= character:
            return index
        if encoding == UTF8:
            units += len(char.encode("utf-8"))
        else:
            units += 2 if ord(char) > 0xFFFF else 1
    return len(line)


def column(text: str, line: int, character: int, encoding: str) -> int:
    """The 0-based code-point column of (`line`, `character`) in `text`."""
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return max(character, 0)
    return code_points(lines[line].rstrip("\r"), character, encoding)
