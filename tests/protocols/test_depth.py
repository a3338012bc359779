"""The JSON nesting bound: its edge, strings and escapes, and what it does not judge."""

from __future__ import annotations

import json

import pytest

from phloem.protocols.depth import MAX_NESTING_DEPTH, NestingTooDeep, check_json_depth


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


@pytest.mark.parametrize("kind", ["[]", "{}"])
def test_exactly_the_limit_passes_one_more_is_refused(kind: str) -> None:
    if kind == "[]":
        edge, over = nested(MAX_NESTING_DEPTH), nested(MAX_NESTING_DEPTH + 1)
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
    check_json_depth(nested(5), limit=5)
    check_json_depth("]]]]" + nested(3), limit=3)  # not JSON: the parser says so, not this
    check_json_depth(b"\xff\xfe" + nested(3).encode(), limit=3)
