"""Transcripts on hostile input: 10,000 generated files — valid transcripts with bytes
changed, lines of random JSON, records of the wrong shapes, nesting around the limit and
far past it, huge and odd values, torn tails, invalid UTF-8 — each loads, or is refused
as `session_corrupt`; nothing else ever comes out (no `RecursionError`, no `TypeError`),
and `count_events` answers a count or None."""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phloem.actors.sessions.transcript import Transcript, count_events
from phloem.protocols.depth import MAX_NESTING_DEPTH
from phloem.protocols.errors import PhloemError

pytestmark = pytest.mark.timeout(120)

CASES = 10_000
SEED = 28

HEADER = {
    "type": "header",
    "version": 1,
    "id": "s-1",
    "app": "phloem",
    "user": "u",
    "state": {},
    "incarnation": "ab",
    "created": 1.0,
    "meta": {},
}


def _event(order: int, text: str = "hi") -> dict[str, Any]:
    return {
        "type": "event",
        "order": order,
        "event": {
            "author": "user",
            "content": {"role": "user", "parts": [{"text": text}]},
            "actions": {"state_delta": {"step": order}},
            "id": f"ev-{order}",
            "timestamp": 1.0,
        },
    }


def _nest(rng: random.Random, depth: int) -> str:
    opener = rng.choice(["[", '{"a":'])
    closer = "]" if opener == "[" else "}"
    return opener * depth + rng.choice(["1", '"x"', "[]", "{}"]) + closer * depth


def _scalar(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            True,
            0,
            -1,
            2**70,
            1.5e308,
            "",
            "x" * rng.randint(0, 300),
            "\u202e\x00\ud7ff",
            '[{"',
        ]
    )


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 6 or roll < 0.4:
        return _scalar(rng)
    if roll < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["type", "order", "event", "kind", "data", "version", "id", "author", "x"]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _line(rng: random.Random, order: int) -> bytes:
    """One complete line (without its newline) of some hostile kind."""
    kind = rng.randrange(12)
    if kind == 0:
        return json.dumps(_event(order)).encode()
    if kind == 1:
        return json.dumps(_value(rng)).encode()
    if kind == 2:  # a record whose fields have the wrong types
        record = _event(order)
        record[rng.choice(["order", "event", "type"])] = _value(rng)
        return json.dumps(record).encode()
    if kind == 3:  # an event whose fields have the wrong types
        record = _event(order)
        record["event"][rng.choice(["author", "content", "actions", "id"])] = _value(rng)
        return json.dumps(record).encode()
    if kind == 4:  # nesting around the limit, or far past it
        depth = rng.choice(
            [MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1, 1_500, 20_000]
        )
        return b'{"type":"sidecar","kind":"k","data":' + _nest(rng, depth).encode() + b"}"
    if kind == 5:  # nesting in the event itself
        return (
            json.dumps(_event(order))
            .encode()
            .replace(b'"hi"', _nest(rng, rng.choice([10, MAX_NESTING_DEPTH, 3_000])).encode())
        )
    if kind == 6:  # a huge integer, NaN, a lone surrogate
        return rng.choice(
            [
                b'{"type":"event","order":' + b"9" * 5_000 + b',"event":{}}',
                b'{"type":"sidecar","kind":"k","data":NaN}',
                b'{"type":"sidecar","kind":"\\ud800","data":1}',
                b'{"type":"sidecar","kind":"k","data":1e999999}',
            ]
        )
    if kind == 7:  # invalid UTF-8 and control bytes
        return b'{"type":"sidecar","kind":"' + bytes(rng.randrange(256) for _ in range(20)) + b'"}'
    if kind == 8:  # a valid line with bytes changed
        data = bytearray(json.dumps(_event(order)).encode())
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data).replace(b"\n", b" ")
    if kind == 9:  # unknown types, versions, a repeated order or id
        record = rng.choice(
            [
                {"type": "future", "version": 2},
                {"type": "event", "version": 99},
                _event(max(1, order - 1)),
                {"type": "sidecar", "data": 1},
            ]
        )
        return json.dumps(record).encode()
    if kind == 10:  # a huge string
        return b'{"type":"sidecar","kind":"k","data":"' + b"[" * rng.randint(1, 30_000) + b'"}'
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))).replace(b"\n", b"")


def _file(rng: random.Random) -> bytes:
    lines = [] if rng.random() < 0.05 else [json.dumps(HEADER).encode()]
    if rng.random() < 0.1:
        lines = [_line(rng, 1)]  # a hostile first line instead of the header
    order = 1
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.4:
            lines.append(json.dumps(_event(order)).encode())
            order += 1
        else:
            lines.append(_line(rng, order))
    data = b"".join(line + b"\n" for line in lines)
    if rng.random() < 0.2:
        data += _line(rng, order)[: rng.randint(0, 50)]  # a torn tail
    return data


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory when the machine has one (10,000 files go through it)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="phloem-fuzz-") as d:
        yield Path(d)


def test_every_generated_transcript_loads_or_is_session_corrupt(scratch: Path) -> None:
    rng = random.Random(SEED)
    path = scratch / "s.jsonl"
    outcomes: dict[str, int] = {}
    started = time.monotonic()
    for _ in range(CASES):
        data = _file(rng)
        path.write_bytes(data)
        counted = count_events(path)
        assert counted is None or isinstance(counted, int)
        try:
            transcript = Transcript.load(path, sync=False)
        except PhloemError as exc:
            assert exc.kind == "session_corrupt", (exc.kind, exc.message, data[:200])
            outcomes["session_corrupt"] = outcomes.get("session_corrupt", 0) + 1
        else:
            transcript.close()
            outcomes["loaded"] = outcomes.get("loaded", 0) + 1
    took = time.monotonic() - started
    print(f"transcripts fuzzed: {CASES} in {took:.1f} s, outcomes {outcomes}")
    assert sum(outcomes.values()) == CASES
    assert outcomes.get("loaded", 0) > 100 and outcomes.get("session_corrupt", 0) > 1_000
