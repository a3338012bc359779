"""Nesting depth: the one bound every decoder of outside input puts on nested data.

Decoders (msgspec, `json`, `tomllib`) recurse, and so does much of what handles the
decoded value (pruning secrets, encoding a reply): nesting deep enough raises
`RecursionError` somewhere, at a depth that depends on the stack at hand. So a decoder
of outside input — socket frames, transcripts, eval sets, plans, config files — checks
the nesting first and refuses more than `MAX_NESTING_DEPTH` levels with `NestingTooDeep`
(a `ValueError`), which it maps to its own typed error. The raw checks never recurse and
cost one pass over the input:

- `check_json_depth(data)`: JSON text (bytes or str), brackets outside strings;
- `check_msgpack_depth(data)`: one msgpack value (strings and binaries are skipped whole);
- `check_value_depth(value)` / `nesting_depth(value)`: a decoded value (dicts, lists,
  tuples), for parsers that have no raw form to scan (TOML).

Depth counts containers: a scalar is 0 deep, `[]` is 1, `{"a": [1]}` is 2. Exactly
`limit` levels pass, one more is refused. Document formats may bound their own values
tighter (a plan's JSON values: `phloem.protocols.jsonvalue.MAX_JSON_DEPTH`, 64).
"""

from __future__ import annotations

import itertools
import operator
import re
import struct
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_NESTING_DEPTH",
    "NestingTooDeep",
    "check_json_depth",
    "check_msgpack_depth",
    "check_value_depth",
    "nesting_depth",
]

MAX_NESTING_DEPTH = 128
"""Deepest nesting any decoder of outside input accepts. Legitimate data stays far below
it (config files nest < 10; a plan's JSON values at most 64, inside a frame's few
envelope levels), and handling a value this deep needs a few hundred stack frames at
most, well inside Python's recursion limit of 1,000."""


class NestingTooDeep(ValueError):
    """The input nests more than `limit` levels."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested more than {limit} levels deep")
        self.limit = limit


# --- JSON text ------------------------------------------------------------------------------

# A string to its closing quote, or an unterminated one to the end: it always matches,
# so the scan never backtracks (possessive quantifiers: linear time whatever the text).
_JSON_STRING = re.compile(rb'"[^"\\]*+(?:\\.?[^"\\]*+)*+(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
# Openers become 2, closers 0: after i brackets the running sum minus i is the depth.
_BRACKET_WEIGHT = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def check_json_depth(
    data: bytes | bytearray | memoryview | str, limit: int = MAX_NESTING_DEPTH
) -> None:
    """Raise `NestingTooDeep` if the JSON text `data` opens more than `limit` brackets
    at once (brackets inside strings do not count). Malformed text is left to the parser."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:  # no more openers than the limit at all
        return
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return
    weights = brackets.translate(_BRACKET_WEIGHT)
    if b"\x02" * (limit + 1) in weights:  # the usual bomb, found by a substring search
        raise NestingTooDeep(limit)
    deepest = max(map(operator.sub, itertools.accumulate(weights), itertools.count(1)))
    if deepest > limit:
        raise NestingTooDeep(limit)


# --- msgpack --------------------------------------------------------------------------------

# Bytes that follow a scalar's type byte (`_MP_FIXED`), or the width of the big-endian
# length that follows it (`_MP_SIZED`: str, bin, ext; ext adds one type byte).
_MP_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4}
_MP_FIXED |= {0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5}
_MP_FIXED |= {0xD7: 9, 0xD8: 17}
_MP_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1)}
_MP_SIZED |= {0xC9: (4, 1), 0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0)}
_MP_CONTAINER = {0xDC: (">H", 1), 0xDD: (">I", 1), 0xDE: (">H", 2), 0xDF: (">I", 2)}
# A container's header byte is one of these: fewer of them than `limit` in the whole
# input, and it cannot nest deeper (the scan is skipped).
_NOT_CONTAINER_BYTE = bytes(b for b in range(256) if not (0x80 <= b <= 0x9F or b >= 0xDC))


def check_msgpack_depth(
    data: bytes | bytearray | memoryview, limit: int = MAX_NESTING_DEPTH
) -> None:
    """Raise `NestingTooDeep` if the msgpack value in `data` nests more than `limit`
    containers. Truncated or invalid input ends the scan; the decoder reports it."""
    raw = bytes(data)
    if len(raw.translate(None, _NOT_CONTAINER_BYTE)) <= limit:
        return
    pending: list[int] = []  # items still to read in each open container
    pos, end = 0, len(raw)
    try:
        while pos < end:
            kind = raw[pos]
            pos += 1
            items = -1  # a scalar
            if kind <= 0x7F or kind >= 0xE0:
                pass
            elif kind <= 0x8F:
                items = 2 * (kind & 0x0F)
            elif kind <= 0x9F:
                items = kind & 0x0F
            elif kind <= 0xBF:
                pos += kind & 0x1F
            elif kind in _MP_FIXED:
                pos += _MP_FIXED[kind]
            elif kind in _MP_SIZED:
                width, extra = _MP_SIZED[kind]
                pos += width + extra + int.from_bytes(raw[pos : pos + width], "big")
            elif kind in _MP_CONTAINER:
                fmt, per = _MP_CONTAINER[kind]
                items = per * struct.unpack_from(fmt, raw, pos)[0]
                pos += struct.calcsize(fmt)
            else:
                return  # 0xc1, never used: not msgpack
            if items >= 0 and len(pending) >= limit:
                raise NestingTooDeep(limit)
            if items > 0:
                pending.append(items)
                continue
            while pending:
                pending[-1] -= 1
                if pending[-1]:
                    break
                pending.pop()
            if not pending:
                return  # the one value is complete
    except struct.error:
        return


# --- decoded values -------------------------------------------------------------------------


def nesting_depth(value: Any, limit: int | None = None) -> int:
    """How deep `value` nests (dicts, lists and tuples), found without recursion; with
    `limit`, the walk stops at the first container deeper than it (returning its depth)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if limit is not None and depth > limit:
            return depth
        stack.extend((child, depth) for child in children)
    return deepest


def check_value_depth(value: Any, limit: int = MAX_NESTING_DEPTH) -> None:
    """Raise `NestingTooDeep` if the decoded `value` nests more than `limit` levels."""
    if nesting_depth(value, limit) > limit:
        raise NestingTooDeep(limit)
