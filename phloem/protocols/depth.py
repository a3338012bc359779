"""The nesting bound of JSON read from a peer, checked before any parser sees it.

A recursive parser given `[[[[...` from a peer recurses once per level: deep enough, it
raises `RecursionError` (or, in a C parser without a guard, exhausts the stack), and a
value that deep is never a legitimate message. `check_json_depth(data)` counts the
nesting of `[` and `{` outside JSON strings (a backslash escapes the next character
inside one) and raises `NestingTooDeep` past `limit` (default `MAX_NESTING_DEPTH`).
Only the nesting is checked, not the syntax: the parser that follows still decides
whether `data` is JSON. Fast on ordinary messages: with at most `limit` opening brackets
in all of `data` nothing is scanned; otherwise strings are cut out and the brackets
summed by C-level passes (regex, `bytes.translate`, `itertools.accumulate`).
"""

from __future__ import annotations

import itertools
import re

MAX_NESTING_DEPTH = 128
"""Deepest nesting of arrays and objects accepted in one JSON message from a peer."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
"""A JSON string, to its closing quote (or to the end of an unterminated one)."""
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(_BRACKETS)))
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""Opening brackets to +1, closing ones to -1 (0xff, read as a signed byte)."""


class NestingTooDeep(ValueError):
    """JSON nested deeper than its limit; `depth` is the deepest level seen (at least
    `limit + 1`)."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(f"JSON nested {depth} levels deep (limit {limit})")
        self.depth = depth
        self.limit = limit


def check_json_depth(data: bytes | str, limit: int = MAX_NESTING_DEPTH) -> None:
    """Raise `NestingTooDeep` when `data` nests `[`/`{` deeper than `limit` outside strings."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return
    outside = _STRING.sub(b"", raw)
    steps = outside.translate(_STEPS, _NOT_BRACKETS)
    if steps.count(1) <= limit:
        return
    deepest = max(itertools.accumulate(memoryview(steps).cast("b")), default=0)
    if deepest > limit:
        raise NestingTooDeep(deepest, limit)
