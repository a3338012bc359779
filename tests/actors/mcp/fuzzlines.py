"""A seeded generator of JSON-RPC lines for the MCP fuzz tests: valid messages, their
mutations (cut, flipped bytes, inserted junk), deep nesting, odd scalars, random bytes."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

METHODS = ["initialize", "ping", "tools/list", "tools/call", "notifications/initialized",
           "notifications/cancelled", "x/unknown", ""]  # fmt: skip
SCALARS = ["1e400", "-0", "NaN", "Infinity", "1" * 5000, '"\\ud800"', '"\\u0000"', "null",
           "true", '"\\x"', "[]", "{}", '"' + "\\\\" * 50 + '"']  # fmt: skip


def _message(rng: random.Random) -> dict[str, object]:
    shape = rng.randrange(5)
    ident: object = rng.choice([rng.randrange(-5, 10**6), "id-" + str(rng.random()), None, True])
    base: dict[str, object] = {"jsonrpc": rng.choice(["2.0", "2.0", "2.0", "1.0", 2])}
    if shape == 0:
        return {**base, "id": ident, "method": rng.choice(METHODS)}
    if shape == 1:
        params = {"name": rng.choice(["read", "grep", ""]), "arguments": {"path": "a"}}
        return {**base, "id": ident, "method": "tools/call", "params": params}
    if shape == 2:
        return {**base, "method": rng.choice(METHODS), "params": {"requestId": ident}}
    if shape == 3:
        return {**base, "id": ident, "result": {"tools": [], "k": [1, {"a": None}]}}
    return {**base, "id": ident, "error": {"code": rng.randrange(-32800, 0), "message": "e"}}


def _mutate(rng: random.Random, line: bytes) -> bytes:
    kind = rng.randrange(6)
    if kind == 0 and line:
        return line[: rng.randrange(len(line))]
    if kind == 1 and line:
        at = rng.randrange(len(line))
        return line[:at] + bytes([rng.randrange(256)]) + line[at + 1 :]
    if kind == 2:
        at = rng.randrange(len(line) + 1)
        junk = rng.choice([b"{", b"[", b'"', b"\\", b",", b":", b"\xff", b"\x00", b"]]"])
        return line[:at] + junk * rng.randrange(1, 4) + line[at:]
    if kind == 3:
        depth = rng.randrange(100, 400)
        opener = rng.choice([b"[", b'{"a":', b'[{"b":'])
        return b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + opener * depth
    if kind == 4:
        return rng.choice(SCALARS).encode()
    return bytes(rng.randrange(256) for _ in range(rng.randrange(40)))


def fuzz_lines(count: int, seed: int = 28) -> Iterator[bytes]:
    """`count` lines (no newline inside any), a third of them valid messages."""
    rng = random.Random(seed)
    for _ in range(count):
        line = json.dumps(_message(rng)).encode()
        if rng.random() < 0.66:
            line = _mutate(rng, line)
        yield line.replace(b"\n", b" ")
