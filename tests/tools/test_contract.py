from __future__ import annotations

from typing import Any

import pytest

from phloem.tools import Tool, ToolContext, ToolFailure, object_schema, validate_arguments
from phloem.tools.contract import JSON

pytestmark = pytest.mark.timeout(10)

SCHEMA = object_schema(
    {
        "name": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        "flag": {"type": "boolean", "default": False},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    ["name"],
)


def _message(args: Any) -> str:
    with pytest.raises(ToolFailure) as caught:
        validate_arguments(SCHEMA, args)
    assert caught.value.code == "arguments"
    return caught.value.message


def test_defaults_are_filled_and_integral_floats_become_ints() -> None:
    assert validate_arguments(SCHEMA, {"name": "x", "count": 3.0}) == {
        "name": "x",
        "count": 3,
        "mode": "a",
        "flag": False,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "arguments must be a JSON object"),
        ({}, "name is required"),
        ({"name": "x", "extra": 1}, "unknown argument extra"),
        ({"name": "x", "count": 1.5}, "count must be an integer"),
        ({"name": "x", "count": True}, "count must be an integer"),
        ({"name": "x", "count": "2"}, "count must be an integer"),
        ({"name": "x", "count": 0}, "count must be >= 1"),
        ({"name": "x", "count": 6}, "count must be <= 5"),
        ({"name": "x", "mode": "c"}, "mode must be one of a, b"),
        ({"name": ""}, "name must not be empty"),
        ({"name": "x", "flag": 1}, "flag must be a boolean"),
        ({"name": "x", "ratio": float("inf")}, "ratio must be a number"),
        ({"name": "x", "tags": ["a", 1]}, "tags[1] must be a string"),
    ],
)
def test_invalid_arguments_name_the_parameter(args: Any, message: str) -> None:
    assert _message(args) == message


class _Echo(Tool):
    name = "echo"
    description = "Echo the name."
    input_schema = SCHEMA

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        if args["name"] == "fail":
            raise ToolFailure("no_match", "asked to fail", lines=[1])
        return {"name": args["name"], "count": args["count"]}


def test_run_validates_first_and_returns_failures_as_values(ctx: ToolContext) -> None:
    assert _Echo().run({"name": "x"}, ctx) == {"name": "x", "count": 2}
    assert _Echo().run({"name": "x", "count": 1.5}, ctx) == {
        "error": "arguments",
        "message": "count must be an integer",
    }
    assert _Echo().run({"name": "fail"}, ctx) == {
        "error": "no_match",
        "message": "asked to fail",
        "lines": [1],
    }


def test_describe_gives_the_exact_schema() -> None:
    described = _Echo().describe()
    assert described["name"] == "echo"
    assert described["input_schema"]["additionalProperties"] is False
    declaration = _Echo().declaration()
    assert (declaration.name, declaration.parameters) == ("echo", SCHEMA)
