"""How deeply JSON text nests, measured before it is decoded.

A decoder that recurses (msgspec, `json`) turns text nested a few thousand deep into a
`RecursionError`, which escapes the error vocabulary of whoever called it. Every decoder
of outside input therefore checks the text first: `check_json_depth` counts `[` and `{`
outside JSON strings (a backslash escapes the character after it) in one linear pass and
raises `NestingTooDeep` when the nesting goes past the limit. It does not validate the
JSON: text that is not JSON is left to the decoder, which reports it in its own terms.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

# The deepest nesting of arrays and objects accepted in JSON text from outside.
MAX_NESTING_DEPTH: Final = 128

# A JSON string, escapes included; an unterminated one runs to the end of the text (so
# that every string is consumed once: the scan stays linear).
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*+"?', re.DOTALL)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_STEP: Final = tuple(1 if b in b"[{" else -1 for b in range(256))


class NestingTooDeep(ValueError):
    """JSON text nests arrays and objects deeper than the limit."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(f"nested {depth} deep, more than {limit}")
        self.depth = depth
        self.limit = limit


def check_json_depth(data: bytes | str, limit: int = MAX_NESTING_DEPTH) -> None:
    """Raise `NestingTooDeep` when `data` nests `[`/`{` deeper than `limit` outside its
    strings (`{"a": [1]}` is 2 deep); return None otherwise."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return  # not enough openers to go deeper, inside strings or not
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)
    if depth > limit:
        raise NestingTooDeep(depth, limit)
