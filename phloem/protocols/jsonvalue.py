"""JSON values: what counts as plain JSON data, strict JSON text, canonical JSON.

Documents phloem takes from outside (plans, results, goals, contexts, callback outputs)
must be *plain JSON data*: None, bool, int, finite float, str (valid UTF-8), lists
(tuples are accepted and become lists) and dicts with str keys, nested at most
`MAX_JSON_DEPTH` deep. Functions, bytes, sets, objects, NaN and infinities are not:
documents carry data, never code.

- `json_value` checks a Python value and returns a fresh plain copy, or raises
  `JsonValueError` whose message names the offending path (``$.steps[0].action``);
- `parse_json_text` reads JSON text strictly: UTF-8, no ``NaN``/``Infinity``, nested at
  most `MAX_NESTING_DEPTH` deep (`phloem.protocols.depth`, checked before parsing), and a
  key given twice in one object is remembered (`duplicate_keys`) so the checker can
  reject it;
- `canonical_json` is the one canonical encoding (UTF-8, sorted keys, no whitespace) and
  `json_size` its length in bytes, the basis of every size limit.

Each document type turns a `JsonValueError` into its own rejection (plans and everything
else of the planning runtime: `PlanError` kind `invalid_plan_json`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import msgspec

from phloem.protocols.depth import NestingTooDeep, check_json_depth

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonValueError",
    "canonical_json",
    "check_text",
    "duplicate_keys",
    "is_int",
    "json_size",
    "json_value",
    "parse_json_text",
]

# Deepest nesting accepted in any JSON value (a plan, context, result, callback output).
MAX_JSON_DEPTH = 64


class JsonValueError(ValueError):
    """A value or JSON text is not plain JSON data; the message names where."""


class _PairsDict(dict[str, Any]):
    """A dict parsed from JSON text that remembers keys given more than once."""

    duplicates: frozenset[str] = frozenset()


def duplicate_keys(obj: Mapping[str, Any]) -> frozenset[str]:
    """Keys given more than once in the JSON object `obj` was parsed from (else empty)."""
    dups: frozenset[str] = getattr(obj, "duplicates", frozenset())
    return dups


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _PairsDict:
    out = _PairsDict()
    dups: set[str] = set()
    for key, value in pairs:
        if key in out:
            dups.add(key)
        out[key] = value
    if dups:
        out.duplicates = frozenset(dups)
    return out


def _reject_constant(name: str) -> Any:
    raise JsonValueError(f"{name} is not a JSON value")


def parse_json_text(data: bytes | bytearray | memoryview | str, what: str = "JSON text") -> Any:
    """Parse JSON text strictly: UTF-8, no NaN/Infinity, duplicate keys remembered.

    Objects come back as dicts that `duplicate_keys` can question; `json_value` rejects
    them when they hold a key twice. `what` names the text in error messages.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonValueError(f"{what} is not valid UTF-8: {exc}") from None
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError("data must be bytes or str")
    try:
        check_json_depth(text)
        return json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)
    except JsonValueError:
        raise
    except NestingTooDeep as exc:
        raise JsonValueError(f"{what} is {exc}") from None
    except RecursionError:
        raise JsonValueError(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise JsonValueError(f"{what} is not valid JSON: {exc}") from None


def check_text(value: str, path: str) -> None:
    """Raise `JsonValueError` unless `value` encodes as UTF-8 (no lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonValueError(f"{path} is not valid UTF-8") from None


def is_int(value: Any) -> bool:
    """True for a JSON integer: an int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def json_value(value: Any, path: str = "$") -> Any:
    """A fresh copy of `value` as plain JSON data, or `JsonValueError` naming the path.

    Accepts None, bool, int, finite float, str (valid UTF-8), list/tuple and dicts with
    str keys (and no key parsed twice), nested at most `MAX_JSON_DEPTH` deep.
    """
    return _json_value(value, path, 0)


def _json_value(value: Any, path: str, depth: int) -> Any:
    if depth > MAX_JSON_DEPTH:
        raise JsonValueError(f"{path} is nested more than {MAX_JSON_DEPTH} deep")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JsonValueError(f"{path} is not a finite number")
        return value
    if isinstance(value, str):
        check_text(value, path)
        return value
    if isinstance(value, list | tuple):
        return [_json_value(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        dups = duplicate_keys(value)
        if dups:
            raise JsonValueError(f"{path} has duplicate key {sorted(dups)[0]!r}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise JsonValueError(f"{path} has a non-string key of type {type(key).__name__}")
            check_text(key, f"{path} key")
            out[key] = _json_value(item, f"{path}.{key}", depth + 1)
        return out
    raise JsonValueError(f"{path} is not JSON data ({type(value).__name__})")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: UTF-8, sorted keys, no whitespace. The basis of every size check."""
    return msgspec.json.encode(value, order="sorted")


def json_size(value: Any) -> int:
    """Bytes of `value`'s canonical JSON (key order does not change the size, so it is
    encoded unsorted). Raises `TypeError`/`msgspec.EncodeError` for unencodable values."""
    return len(msgspec.json.encode(value))
