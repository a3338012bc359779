"""The JSON-value rule (`phloem.protocols.jsonvalue`) on its own, without a document type."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from phloem.protocols import jsonvalue as jv

pytestmark = pytest.mark.timeout(30)

finite = st.floats(allow_nan=False, allow_infinity=False)
json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_data)
def test_json_data_is_copied_and_its_size_is_that_of_its_canonical_json(value: Any) -> None:
    assert jv.json_value(value) == value
    assert jv.json_size(value) == len(jv.canonical_json(value))


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": [1, float("nan")]}, "$.a[1] is not a finite number"),
        ({"a": {1: 2}}, "$.a has a non-string key of type int"),
        ({"a": b"x"}, "$.a is not JSON data (bytes)"),
        ({"a": "\ud800"}, "$.a is not valid UTF-8"),
        ({"a": {1, 2}}, "$.a is not JSON data (set)"),
    ],
)
def test_non_json_data_is_rejected_naming_the_path(value: Any, where: str) -> None:
    with pytest.raises(jv.JsonValueError) as info:
        jv.json_value(value)
    assert str(info.value) == where


def test_nesting_is_bounded() -> None:
    value: Any = 0
    for _ in range(jv.MAX_JSON_DEPTH + 1):
        value = [value]
    with pytest.raises(jv.JsonValueError, match="nested more than"):
        jv.json_value(value)


def test_text_is_parsed_strictly_and_duplicate_keys_are_remembered() -> None:
    parsed = jv.parse_json_text(b'{"a": 1, "a": 2, "b": {"c": 3}}')
    assert jv.duplicate_keys(parsed) == {"a"}
    assert jv.duplicate_keys(parsed["b"]) == frozenset()
    with pytest.raises(jv.JsonValueError, match="duplicate key 'a'"):
        jv.json_value(parsed, "$")
    for text, message in [
        ("[NaN]", "NaN is not a JSON value"),
        (b"\xff", "doc is not valid UTF-8"),
        ("[1,", "doc is not valid JSON"),
    ]:
        with pytest.raises(jv.JsonValueError, match=message):
            jv.parse_json_text(text, "doc")
