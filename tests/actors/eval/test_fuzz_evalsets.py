"""Eval set files on hostile input: 10,000 generated documents — phloem's, ADK's and the
legacy format with fields removed, retyped and replaced, random JSON, nesting around
the limit and far past it, huge and odd values, invalid UTF-8 — each parses into an
`EvalSet` with at least one case, or is refused as `eval_set_invalid`; nothing else ever
comes out."""

from __future__ import annotations

import copy
import json
import random
import re
import time
from typing import Any

import pytest

from phloem.protocols.depth import MAX_NESTING_DEPTH
from phloem.protocols.errors import PhloemError
from phloem.protocols.evalset import EvalSet, parse_evalset
from tests.actors.eval.fixtures import ADK_CAMEL, ADK_LEGACY, ADK_SNAKE, case, phloem_set

pytestmark = pytest.mark.timeout(120)

CASES = 10_000
SEED = 9

PHLOEM = phloem_set(
    [
        case("a", {"input": "hi", "expected_response": "hello"}),
        case("b", {"input": "x", "expected_trajectory": [{"name": "t", "args": {"k": 1}}]}),
    ],
    "set",
)
DOCUMENTS = (PHLOEM, ADK_SNAKE, ADK_CAMEL, ADK_LEGACY)


def _odd(rng: random.Random) -> Any:
    return rng.choice(
        [None, True, 0, -1, 2**80, 1e308, "", "x" * 2_000, "\u202e\ud7ff", [], {}, [[]], {"": 1}]
    )


def _nest(rng: random.Random) -> str:
    """A stand-in for a nested value, replaced by its JSON text once the document is
    encoded (building it as a Python value would nest this test's own recursion)."""
    return f"@nest:{rng.choice([3, MAX_NESTING_DEPTH - 5, MAX_NESTING_DEPTH, 3_000])}@"


def _nested_text(match: re.Match[str]) -> str:
    depth = int(match.group(1))
    opener, closer = ("[", "]") if depth % 2 else ('{"k":', "}")
    return opener * depth + "1" + closer * depth


def _encode(doc: Any) -> str:
    return re.sub(r'"@nest:(\d+)@"', _nested_text, json.dumps(doc))


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*path, i)))
    return out


def _mutate(rng: random.Random, doc: Any) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(doc))
        if not path:
            return rng.choice([_odd(rng), _nest(rng)])
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        roll = rng.random()
        if roll < 0.3 and isinstance(parent, dict):
            del parent[last]
        elif roll < 0.4 and isinstance(parent, dict):
            parent[rng.choice(["x", "cases", "eval_cases", "turns", "conversation"])] = _odd(rng)
        elif roll < 0.6:
            parent[last] = _nest(rng)
        else:
            parent[last] = _odd(rng)
    return doc


def _deep_text(rng: random.Random) -> bytes:
    depth = rng.choice([MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1, 20_000])
    opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
    middle = opener * depth + b"1" + closer * depth
    return rng.choice([middle, b'{"eval_set_id": "s", "eval_cases": [' + middle + b"]}"])


def _bytes(rng: random.Random) -> bytes:
    data = bytearray(json.dumps(rng.choice(DOCUMENTS)).encode())
    for _ in range(rng.randint(1, 5)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def _input(rng: random.Random) -> bytes | str:
    kind = rng.randrange(10)
    if kind < 5:
        return _encode(_mutate(rng, rng.choice(DOCUMENTS)))
    if kind == 5:
        return json.dumps(rng.choice(DOCUMENTS))
    if kind == 6:
        return _deep_text(rng)
    if kind == 7:
        return _bytes(rng)
    if kind == 8:
        return rng.choice(
            [
                b'{"schema_version": 2, "id": "s", "version": ' + b"9" * 5_000 + b', "cases": []}',
                b'{"schema_version": NaN}',
                b'{"eval_set_id": "\\ud800", "eval_cases": []}',
                b"\xff\xfe" + b"[" * 10,
                b"",
                b"null",
                b'"' + b"[" * 50_000 + b'"',
            ]
        )
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))


def test_every_generated_eval_set_parses_or_is_eval_set_invalid() -> None:
    rng = random.Random(SEED)
    outcomes: dict[str, int] = {}
    started = time.monotonic()
    for _ in range(CASES):
        data = _input(rng)
        try:
            parsed = parse_evalset(data)
        except PhloemError as exc:
            assert exc.kind == "eval_set_invalid", (exc.kind, exc.message, data[:200])
            outcomes["invalid"] = outcomes.get("invalid", 0) + 1
        else:
            assert isinstance(parsed, EvalSet) and parsed.cases
            outcomes["parsed"] = outcomes.get("parsed", 0) + 1
    took = time.monotonic() - started
    print(f"eval sets fuzzed: {CASES} in {took:.1f} s, outcomes {outcomes}")
    assert outcomes.get("parsed", 0) > 500 and outcomes.get("invalid", 0) > 3_000
