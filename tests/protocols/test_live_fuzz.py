"""Fuzzing the Live server-frame decoder: whatever arrives on the socket, `decode_server`
returns a frame the session can publish or raises `LiveProtocolError` — nothing else
(no `RecursionError`, `UnicodeError`, `OverflowError`, ...).

A seeded generator makes `FUZZ_INPUTS` inputs from valid frames, broken by the ways a
peer can break them: deep nesting in every field, values of the wrong type, huge and
non-finite numbers, invalid UTF-8 and lone surrogates, truncation, byte flips, bounds
exceeded, noise. Hypothesis adds arbitrary JSON and arbitrary bytes on top.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
from hypothesis import given, settings, strategies as st

from phloem.protocols import live as wire

FUZZ_INPUTS = 12_000
SEED = 28

_event_encoder = msgspec.msgpack.Encoder()

VALID_FRAMES: list[dict[str, Any]] = [
    {"setupComplete": {}},
    {"setupComplete": {"sessionId": "s-1"}},
    {"serverContent": {"modelTurn": {"parts": [{"text": "hi"}]}, "turnComplete": True}},
    {
        "serverContent": {
            "modelTurn": {
                "parts": [
                    {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAA="}},
                    {"text": "t", "thought": True},
                    {"executableCode": {"language": "PYTHON", "code": "1"}},
                    {"codeExecutionResult": {"outcome": "OK", "output": "1"}},
                ]
            },
            "groundingMetadata": {"chunks": [{"web": {"uri": "u", "n": 3}}]},
            "inputTranscription": {"text": "a", "finished": True},
            "interrupted": False,
        }
    },
    {"toolCall": {"functionCalls": [{"id": "c1", "name": "f", "args": {"a": [1, {"b": 2}]}}]}},
    {"toolCallCancellation": {"ids": ["c1", "c2"]}},
    {"goAway": {"timeLeft": "12.5s"}},
    {"sessionResumptionUpdate": {"newHandle": "h", "resumable": True}},
    {"usageMetadata": {"totalTokenCount": 3, "promptTokenCount": 1}},
    {"serverContent": {"turnComplete": True}, "usageMetadata": {"totalTokenCount": 9}},
]

WRONG_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    "",
    "x",
    [],
    {},
    [None],
    {"": None},
    2**63,
    -(2**63) - 1,
    10**400,
    "\u0000",
    "\U0001f600",
]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `value` (its keys and indexes), the root included."""
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*path, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], rest, new)
    return copy


def _deep(rng: random.Random, depth: int) -> str:
    """JSON text nested `depth` deep: arrays, objects or a mix."""
    shape = rng.choice(("[", "{", "mix"))
    opens, closes = [], []
    for level in range(depth):
        array = shape == "[" or (shape == "mix" and level % 2 == 0)
        opens.append("[" if array else '{"k":')
        closes.append("]" if array else "}")
    core = rng.choice(("1", '"x"', "null", "[]", "{}"))
    return "".join(opens) + core + "".join(reversed(closes))


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


def _wrong_type(rng: random.Random, frame: dict[str, Any]) -> str:
    path = rng.choice(_paths(frame))
    return _dumps(_replace(frame, path, rng.choice(WRONG_VALUES)))


def _nested_in_a_field(rng: random.Random, frame: dict[str, Any]) -> str:
    path = rng.choice(_paths(frame))
    marker = "\u0000DEEP\u0000"
    depth = rng.choice((wire.MAX_NESTING_DEPTH, wire.MAX_NESTING_DEPTH + 1, 1000, 5000, 20_000))
    return _dumps(_replace(frame, path, marker)).replace(_dumps(marker), _deep(rng, depth))


def _huge_number(rng: random.Random, frame: dict[str, Any]) -> str:
    path = rng.choice(_paths(frame))
    number = rng.choice(
        (
            "9" * rng.randint(19, 5000),
            "-" + "9" * rng.randint(19, 400),
            "1e309",
            "-1e400",
            "1" + "0" * 400 + ".5",
            "NaN",
            "Infinity",
            "-0",
            str(2**63 - 1),
            str(-(2**63)),
        )
    )
    marker = "\u0000NUM\u0000"
    return _dumps(_replace(frame, path, marker)).replace(_dumps(marker), number)


def _bad_utf8(rng: random.Random, frame: dict[str, Any]) -> bytes:
    raw = bytearray(_dumps(frame).encode())
    at = rng.randrange(len(raw) + 1)
    raw[at:at] = rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80"))
    return bytes(raw)


def _surrogate(rng: random.Random, frame: dict[str, Any]) -> str:
    text = _dumps(frame)
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(("\ud800", "\udfff", "\\ud800", "\\udc00\\ud800")) + text[at:]


def _truncated(rng: random.Random, frame: dict[str, Any]) -> str:
    text = _dumps(frame)
    return text[: rng.randrange(len(text))]


def _flipped(rng: random.Random, frame: dict[str, Any]) -> bytes:
    raw = bytearray(_dumps(frame).encode())
    for _ in range(rng.randint(1, 4)):
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


def _over_a_bound(rng: random.Random, frame: dict[str, Any]) -> str:
    choice = rng.randrange(4)
    if choice == 0:
        parts = [{"text": "x"}] * rng.choice((wire.MAX_PARTS, wire.MAX_PARTS + 1, 5000))
        return _dumps({"serverContent": {"modelTurn": {"parts": parts}}})
    if choice == 1:
        calls = [{"id": str(i), "name": "f"} for i in range(wire.MAX_FUNCTION_CALLS + 1)]
        return _dumps({"toolCall": {"functionCalls": calls}})
    if choice == 2:
        size = rng.choice((wire.MAX_HANDLE_BYTES, wire.MAX_HANDLE_BYTES + 1))
        return _dumps({"sessionResumptionUpdate": {"newHandle": "h" * size}})
    return _dumps({**frame, **rng.choice(VALID_FRAMES)})  # two messages, mostly


def _noise(rng: random.Random, frame: dict[str, Any]) -> bytes | str:
    if rng.random() < 0.5:
        return rng.randbytes(rng.randint(0, 200))
    alphabet = '{}[]":,\\ntrufalse0123456789.-eE \t\u00e9\ud800'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))


MUTATIONS: list[Callable[[random.Random, dict[str, Any]], bytes | str]] = [
    _wrong_type,
    _nested_in_a_field,
    _huge_number,
    _bad_utf8,
    _surrogate,
    _truncated,
    _flipped,
    _over_a_bound,
    _noise,
]


def typed_outcome(frame: bytes | str) -> str:
    """`ok` (and publishable as an event: msgpack can carry it) or the error's path root;
    anything else fails the test."""
    try:
        message = wire.decode_server(frame)
    except wire.LiveProtocolError as exc:
        assert exc.path.startswith("$") and exc.reason, exc
        return "protocol_error"
    _event_encoder.encode(message)
    return "ok"


def test_ten_thousand_generated_frames_have_only_typed_outcomes() -> None:
    rng = random.Random(SEED)
    outcomes: Counter[str] = Counter()
    by_mutation: Counter[str] = Counter()
    for i in range(FUZZ_INPUTS):
        mutate = MUTATIONS[i % len(MUTATIONS)]
        frame = mutate(rng, rng.choice(VALID_FRAMES))
        if rng.random() < 0.5:  # text and binary WebSocket frames alike
            frame = frame.encode("utf-8", "surrogatepass") if isinstance(frame, str) else frame
        outcomes[typed_outcome(frame)] += 1
        by_mutation[mutate.__name__] += 1
    print(f"live fuzz: {sum(outcomes.values())} inputs (floor {10_000}), {dict(outcomes)}")
    assert sum(outcomes.values()) >= 10_000
    assert outcomes["ok"] > 0 and outcomes["protocol_error"] > 0  # both ways were taken
    assert len(by_mutation) == len(MUTATIONS)


def test_every_valid_frame_decodes() -> None:
    for frame in VALID_FRAMES:
        assert typed_outcome(_dumps(frame)) == "ok"
        assert typed_outcome(_dumps(frame).encode()) == "ok"


def test_nesting_at_the_limit_decodes_and_one_over_is_a_protocol_error() -> None:
    # the frame, toolCall, functionCalls, the call and args: five levels before `a`
    inner = wire.MAX_NESTING_DEPTH - 5
    value: Any = 1
    for _ in range(inner):
        value = [value]
    at_limit = {"toolCall": {"functionCalls": [{"name": "f", "args": {"a": value}}]}}
    wire.decode_server(_dumps(at_limit))
    over = {"toolCall": {"functionCalls": [{"name": "f", "args": {"a": [value]}}]}}
    try:
        wire.decode_server(_dumps(over))
    except wire.LiveProtocolError as exc:
        assert exc.path == "$" and str(wire.MAX_NESTING_DEPTH) in exc.reason
    else:
        raise AssertionError("one level over the limit decoded")


def test_integers_at_and_past_int64() -> None:
    for good in (wire.MAX_FRAME_INT, wire.MIN_FRAME_INT):
        frame = {"toolCall": {"functionCalls": [{"name": "f", "args": {"n": [good]}}]}}
        assert typed_outcome(_dumps(frame)) == "ok"
        usage = wire.decode_server(_dumps({"usageMetadata": {"totalTokenCount": good}}))
        assert usage.usage_metadata is not None
    for bad in (wire.MAX_FRAME_INT + 1, wire.MIN_FRAME_INT - 1):
        frame = {"toolCall": {"functionCalls": [{"name": "f", "args": {"n": [0, bad]}}]}}
        try:
            wire.decode_server(_dumps(frame))
        except wire.LiveProtocolError as exc:
            assert exc.path == "$.toolCall.functionCalls[0].args.n[1]"
        else:
            raise AssertionError(f"{bad} decoded")
        grounding = {"serverContent": {"groundingMetadata": {"x": {"y": bad}}}}
        try:
            wire.decode_server(_dumps(grounding))
        except wire.LiveProtocolError as exc:
            assert exc.path == "$.serverContent.groundingMetadata.x.y"
        else:
            raise AssertionError(f"{bad} decoded")
        try:
            wire.decode_server(_dumps({"usageMetadata": {"totalTokenCount": bad}}))
        except wire.LiveProtocolError as exc:
            assert exc.path == "$.usageMetadata.totalTokenCount"
        else:
            raise AssertionError(f"{bad} decoded")


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=40,
)
_frame = st.dictionaries(
    st.sampled_from([*wire.PRIMARY_FIELDS, "usage_metadata", "other"]).map(
        lambda name: "".join(w.capitalize() if i else w for i, w in enumerate(name.split("_")))
    ),
    _json,
    min_size=1,
    max_size=2,
)


@settings(max_examples=400, deadline=None)
@given(_frame)
def test_arbitrary_json_under_known_keys(frame: dict[str, Any]) -> None:
    typed_outcome(json.dumps(frame))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=200))
def test_arbitrary_bytes_and_text(frame: bytes | str) -> None:
    typed_outcome(frame)
