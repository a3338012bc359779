"""`phloem.protocols.depth`: the one nesting bound, exactly at the limit and one over, for
JSON text, msgpack and decoded values; strings never count; the scans are linear (a
bomb of millions of brackets is refused without recursing); and the decoders built on it
(JSON documents, plans, socket frames) refuse one level over with their own error."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from phloem.protocols import plan as pl
from phloem.protocols.depth import (
    MAX_NESTING_DEPTH,
    NestingTooDeep,
    check_json_depth,
    check_msgpack_depth,
    check_value_depth,
    nesting_depth,
)
from phloem.protocols.errors import PhloemError
from phloem.protocols.jsonvalue import JsonValueError, parse_json_text
from phloem.protocols.wire import (
    MAX_SERVER_FRAME_DEPTH,
    Ask,
    BadRequest,
    Reply,
    decode_client,
    decode_server,
    encode_frame,
)

LIMIT = MAX_NESTING_DEPTH


def arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def objects(depth: int) -> str:
    return '{"k":' * depth + "1" + "}" * depth


def mixed(depth: int) -> Any:
    """A decoded value `depth` deep, built without recursion."""
    value: Any = "leaf"
    for i in range(depth):
        value = [value, 1] if i % 2 else {"k": value, "n": None}
    return value


def test_the_limit_is_128() -> None:
    assert MAX_NESTING_DEPTH == 128


@pytest.mark.parametrize("text", [arrays, objects, lambda d: json.dumps(mixed(d))])
def test_json_text_passes_at_the_limit_and_is_refused_one_over(text: Any) -> None:
    check_json_depth(text(LIMIT))
    check_json_depth(text(LIMIT).encode())
    with pytest.raises(NestingTooDeep, match=f"more than {LIMIT} levels"):
        check_json_depth(text(LIMIT + 1))
    check_json_depth(text(3), limit=3)
    with pytest.raises(NestingTooDeep):
        check_json_depth(text(4), limit=3)


def test_brackets_inside_strings_never_count() -> None:
    inside = json.dumps({"s": "[" * 10_000 + '\\"{' * 500, "t": ["]]]", "\\", "[["]})
    check_json_depth(inside)
    check_json_depth('"\\\\"' + arrays(LIMIT))  # an escaped backslash ends no string early
    with pytest.raises(NestingTooDeep):
        check_json_depth('["\\"", ' + arrays(LIMIT) + "]")  # an escaped quote ends none


def test_malformed_json_is_left_to_the_parser() -> None:
    for text in ("", "]]]]", "[[[", '"unterminated [[[', "\\", '"\\', "}{" * 1000):
        check_json_depth(text)  # not too deep: the parser says what is wrong
    with pytest.raises(NestingTooDeep):
        check_json_depth("[" * 100_000)  # torn, but already too deep


def test_a_bomb_of_millions_of_brackets_is_refused_without_recursing() -> None:
    with pytest.raises(NestingTooDeep):
        check_json_depth(b"[" * 2_000_000 + b"]" * 2_000_000)
    with pytest.raises(NestingTooDeep):  # not consecutive: the full scan finds it
        check_json_depth(b"[[]" * 200 + b"]" * 200)
    check_json_depth(b"[[]]" * 1_000_000)  # many brackets, shallow
    check_json_depth('"' + "\\" * 3_000_001 + '"')  # a long run of escapes


@pytest.mark.parametrize("shape", ["arrays", "maps", "mixed"])
def test_msgpack_passes_at_the_limit_and_is_refused_one_over(shape: str) -> None:
    def packed(depth: int) -> bytes:
        if shape == "arrays":
            return b"\x91" * depth + b"\xc0"
        if shape == "maps":
            return b"\x81\xa1k" * depth + b"\x01"
        return msgspec.msgpack.encode(mixed(depth))

    check_msgpack_depth(packed(LIMIT))
    with pytest.raises(NestingTooDeep):
        check_msgpack_depth(packed(LIMIT + 1))
    check_msgpack_depth(memoryview(packed(LIMIT)))


def test_msgpack_counts_empty_containers_and_skips_strings_and_binaries() -> None:
    with pytest.raises(NestingTooDeep):
        check_msgpack_depth(b"\x91" * LIMIT + b"\x90")  # the last level is empty
    payload = b"\x91" * 1_000  # container bytes, inside values: never headers
    for value in (payload.decode("latin-1"), payload, [payload] * 3, {"k": payload}):
        check_msgpack_depth(msgspec.msgpack.encode(value))
    wide = msgspec.msgpack.encode([[1, [2, {"a": [3]}]]] * 10_000)  # wide, 5 deep
    check_msgpack_depth(wide, limit=5)
    with pytest.raises(NestingTooDeep):
        check_msgpack_depth(wide, limit=4)


def test_truncated_or_invalid_msgpack_ends_the_scan() -> None:
    for data in (b"", b"\x91" * 5, b"\xdc\xff", b"\xc1" + b"\x91" * 500, b"\xdb\xff\xff"):
        check_msgpack_depth(data)
    with pytest.raises(NestingTooDeep):
        check_msgpack_depth(b"\xdc\xff\xff" * 200)  # array16 headers, all open


def test_decoded_values_pass_at_the_limit_and_are_refused_one_over() -> None:
    assert nesting_depth("x") == 0 and nesting_depth([]) == 1 and nesting_depth({"a": [1]}) == 2
    assert nesting_depth(mixed(LIMIT)) == LIMIT
    assert nesting_depth((1, (2,))) == 2
    check_value_depth(mixed(LIMIT))
    with pytest.raises(NestingTooDeep):
        check_value_depth(mixed(LIMIT + 1))
    assert nesting_depth(mixed(100_000), limit=10) == 11  # stops early, no recursion


def test_json_documents_and_plans_refuse_text_nested_one_over_the_limit() -> None:
    assert parse_json_text(arrays(LIMIT)) is not None
    with pytest.raises(JsonValueError, match=f"plan is nested more than {LIMIT} levels"):
        parse_json_text(arrays(LIMIT + 1), "plan")
    assert raises_plan(arrays(100_000)) == "invalid_plan_json"


def raises_plan(text: str) -> str:
    with pytest.raises(pl.PlanError) as info:
        pl.decode(text)
    return str(info.value.kind)


def test_a_request_frame_passes_at_the_limit_and_is_refused_one_over() -> None:
    def frame(body_depth: int) -> bytes:
        body = msgspec.Raw(b"\x91" * body_depth + b"\xc0")
        return encode_frame(Ask(7, "echo", body, 5))[4:]  # the Ask map is one level

    ask = decode_client(frame(LIMIT - 1))
    assert isinstance(ask, Ask) and ask.id == 7
    with pytest.raises(BadRequest) as info:
        decode_client(frame(LIMIT))
    assert info.value.kind == "bad_message" and info.value.request_id == 7
    assert f"more than {LIMIT} levels" in info.value.message


def test_a_daemon_frame_may_nest_deeper_than_a_request_up_to_its_own_limit() -> None:
    def frame(body_depth: int) -> bytes:
        return encode_frame(Reply(3, msgspec.Raw(b"\x91" * body_depth + b"\xc0")))[4:]

    assert MAX_SERVER_FRAME_DEPTH == 2 * LIMIT
    reply = decode_server(frame(MAX_SERVER_FRAME_DEPTH - 1))
    assert isinstance(reply, Reply)
    with pytest.raises(PhloemError) as info:
        decode_server(frame(MAX_SERVER_FRAME_DEPTH))
    assert info.value.kind == "bad_frame"
