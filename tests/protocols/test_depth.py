"""The nesting check every decoder of outside input runs first: `[`/`{` counted outside
JSON strings (escapes respected), the limit's edge, linear on the largest frames."""

from __future__ import annotations

import json

import pytest

from phloem.protocols.depth import MAX_NESTING_DEPTH, NestingTooDeep, check_json_depth


def nested(depth: int) -> str:
    """`depth` arrays and objects, alternating, around a number."""
    text = "1"
    for level in range(depth):
        text = f"[{text}]" if level % 2 else f'{{"k":{text}}}'
    return text


def test_the_limit_and_one_over() -> None:
    at_limit = nested(MAX_NESTING_DEPTH)
    json.loads(at_limit)  # the helper really nests that deep
    check_json_depth(at_limit)
    check_json_depth(at_limit.encode())
    with pytest.raises(NestingTooDeep) as info:
        check_json_depth(nested(MAX_NESTING_DEPTH + 1))
    assert isinstance(info.value, ValueError)
    assert (info.value.depth, info.value.limit) == (MAX_NESTING_DEPTH + 1, MAX_NESTING_DEPTH)
    check_json_depth("[[[]]]", limit=3)
    with pytest.raises(NestingTooDeep):
        check_json_depth("[[[[]]]]", limit=3)
    check_json_depth("", limit=0)
    check_json_depth("1", limit=0)
    with pytest.raises(NestingTooDeep):
        check_json_depth("[]", limit=0)


def test_depth_is_nesting_not_count() -> None:
    many = "[" + ",".join(["[]"] * 10_000) + "]"
    check_json_depth(many, limit=2)
    with pytest.raises(NestingTooDeep):
        check_json_depth(many, limit=1)


def test_brackets_inside_strings_do_not_count() -> None:
    deep_text = json.dumps({"text": "[" * 5000 + "{" * 5000})
    check_json_depth(deep_text, limit=1)
    # an escaped quote does not end the string; an escaped backslash does not escape it
    check_json_depth(r'{"a": "\" [[[[[[[[ \""}', limit=1)
    with pytest.raises(NestingTooDeep):
        check_json_depth(r'{"a": "\\", "b": [[[[[[[[]]]]]]]]}', limit=2)
    check_json_depth(json.dumps(["\\" * 7 + '"[[[['] * 3), limit=1)
    # outside strings again after one: what follows counts
    with pytest.raises(NestingTooDeep):
        check_json_depth('["x", ["y", ["z"]]]', limit=2)


def test_malformed_text_is_left_to_the_decoder() -> None:
    check_json_depth('"unterminated [[[[[[', limit=0)  # all of it one string
    check_json_depth("]]]]", limit=0)
    check_json_depth(b"\xff\xfe[", limit=1)
    check_json_depth('"\ud800"', limit=0)  # a lone surrogate in a str
    with pytest.raises(NestingTooDeep):
        check_json_depth("\\" + "[" * 10, limit=5)  # a stray backslash outside strings


def test_quotes_and_backslashes_in_bulk_stay_linear() -> None:
    # every shape that could make a string pattern backtrack, at the size of a Live frame
    size = 4 * 1024 * 1024
    brackets = b"[]" * (MAX_NESTING_DEPTH + 1)  # enough openers that the text is scanned
    for text in (b'\\"' * (size // 2), b'"' + b'\\"' * (size // 2), b'"' * size, b"[]" * size):
        check_json_depth(text + brackets, limit=MAX_NESTING_DEPTH)
    with pytest.raises(NestingTooDeep):
        check_json_depth(b"[" * size)


def uniform(depth: int, open_: str = "[", close: str = "]") -> str:
    """`depth` brackets of one kind around nothing."""
    return open_ * depth + close * depth


@pytest.mark.parametrize("kind", ["[]", "{}"])
def test_exactly_the_limit_passes_one_more_is_refused(kind: str) -> None:
    if kind == "[]":
        edge, over = uniform(MAX_NESTING_DEPTH), uniform(MAX_NESTING_DEPTH + 1)
    else:
        edge = '{"a":' * (MAX_NESTING_DEPTH - 1) + "{}" + "}" * (MAX_NESTING_DEPTH - 1)
        over = '{"a":' * MAX_NESTING_DEPTH + "{}" + "}" * MAX_NESTING_DEPTH
    assert json.loads(edge) is not None
    check_json_depth(edge)
    check_json_depth(edge.encode())
    with pytest.raises(NestingTooDeep) as info:
        check_json_depth(over.encode())
    assert (info.value.depth, info.value.limit) == (MAX_NESTING_DEPTH + 1, MAX_NESTING_DEPTH)
    assert isinstance(info.value, ValueError)


def test_brackets_inside_strings_do_not_count_escapes_included() -> None:
    inside = json.dumps(["[" * 1000, "{" * 1000, '\\"[[[', "\\\\"])
    check_json_depth(inside)
    # an escaped quote does not end the string; an escaped backslash before a quote does
    check_json_depth('["\\"' + "[" * 500 + '"]')
    with pytest.raises(NestingTooDeep):
        check_json_depth('["\\\\"' + "," + "[" * 500)
    check_json_depth('"' + "[" * 500)  # an unterminated string holds what follows


def test_mixed_and_wide_values_and_a_custom_limit() -> None:
    wide = json.dumps([[i, {"k": [i]}] for i in range(10_000)])
    check_json_depth(wide)  # many brackets, depth 4
    with pytest.raises(NestingTooDeep):
        check_json_depth(wide, limit=3)
    check_json_depth(uniform(5), limit=5)
    check_json_depth("]]]]" + uniform(3), limit=3)  # not JSON: the parser says so, not this
    check_json_depth(b"\xff\xfe" + uniform(3).encode(), limit=3)
