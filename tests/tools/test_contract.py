from __future__ import annotations

from typing import Any

import pytest

from phloem.tools import (
    ERROR_CODES,
    FunctionTool,
    Tool,
    ToolContext,
    ToolFailure,
    as_tool,
    object_schema,
    unknown_tool,
    validate_arguments,
)
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
        ({"name": "x", "count": 0}, "count must be between 1 and 5"),
        ({"name": "x", "count": 6}, "count must be between 1 and 5"),
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


# -- the one contract for plain functions ------------------------------------------------


def lookup(company: str, year: int = 2024, strict: bool = False, note: Any = None) -> JSON:
    """Look up the latest filing."""
    return {"filing": f"{company} {year}"}


def test_a_plain_function_becomes_a_tool_with_an_exact_schema_from_its_signature() -> None:
    tool = as_tool(lookup)
    assert isinstance(tool, FunctionTool)
    assert (tool.name, tool.description, tool.needs_workspace) == (
        "lookup",
        "Look up the latest filing.",
        False,
    )
    assert tool.input_schema == object_schema(
        {
            "company": {"type": "string"},
            "year": {"type": "integer"},
            "strict": {"type": "boolean"},
            "note": {},
        },
        ["company"],
    )
    declaration = tool.declaration()
    assert (declaration.name, declaration.parameters) == ("lookup", tool.input_schema)
    assert as_tool(tool) is tool


def test_a_function_tool_runs_without_a_workspace_and_wraps_non_dict_results() -> None:
    ctx = ToolContext()
    assert as_tool(lookup).run({"company": "ACME", "year": 2.0}, ctx) == {"filing": "ACME 2"}
    assert FunctionTool("add", lambda a, b: a + b).run({"a": 2, "b": 3}, ctx) == {"result": 5}
    assert as_tool(lookup).run({"note": {"any": "value"}}, ctx) == {
        "error": "arguments",
        "message": "company is required",
    }


def test_function_tool_failures_are_values() -> None:
    def picky(path: str) -> str:
        raise ToolFailure("missing", f"no {path}")

    def fixed(a: int = 0) -> int:
        return a

    ctx = ToolContext()
    assert as_tool(picky).run({"path": "x"}, ctx) == {"error": "missing", "message": "no x"}
    # a schema naming a parameter the function does not take: the call cannot bind
    wrong = FunctionTool("fixed", fixed, parameters={"properties": {"b": {"type": "integer"}}})
    assert wrong.run({"b": 1}, ctx) == {
        "error": "arguments",
        "message": "got an unexpected keyword argument 'b'",
    }


def test_given_parameters_are_made_exact_and_must_be_an_object_schema() -> None:
    parameters = {"type": "object", "properties": {"a": {"type": "integer"}}}
    tool = FunctionTool("add", lambda a: a, "", parameters)
    assert tool.input_schema == {**parameters, "additionalProperties": False}
    assert "additionalProperties" not in parameters  # the caller's dict is not changed
    with pytest.raises(ValueError, match=r"^parameters must be an object schema$"):
        FunctionTool("f", lambda: 0, parameters={"type": "array"})
    with pytest.raises(ValueError, match=r"^parameters must not allow additional properties$"):
        FunctionTool("f", lambda: 0, parameters={"type": "object", "additionalProperties": True})
    with pytest.raises(ValueError, match=r"^function_declaration\.name must match"):
        as_tool(lambda: 0)  # "<lambda>" is no function name
    with pytest.raises(
        TypeError, match=r"^a tool must be a phloem.tools Tool or a plain callable$"
    ):
        as_tool("read")  # type: ignore[arg-type]


def test_a_tool_without_arguments_declares_no_parameters() -> None:
    def ping() -> str:
        return "pong"

    assert as_tool(ping).declaration().parameters is None
    assert as_tool(ping).run({}, ToolContext()) == {"result": "pong"}


def test_a_workspace_tool_without_a_workspace_fails_with_no_workspace() -> None:
    from phloem.tools.read import ReadTool

    assert ReadTool.needs_workspace
    assert ReadTool().run({"path": "a.txt"}, ToolContext()) == {
        "error": "no_workspace",
        "message": "this tool call has no workspace",
    }


def test_unknown_tool_is_the_registry_failure_value() -> None:
    assert unknown_tool("nope") == {"error": "unknown_tool", "message": "no tool named nope"}
    assert "unknown_tool" in ERROR_CODES and "no_workspace" in ERROR_CODES


@pytest.mark.parametrize(
    ("spec", "value", "message"),
    [
        ({"type": ["string", "null"]}, 1, "x must be a string or null"),
        ({"type": "null"}, "a", "x must be null"),
        ({"enum": [1, 2]}, 3, "x must be one of 1, 2"),
    ],
)
def test_schemas_of_plain_functions_validate_alike(spec: JSON, value: Any, message: str) -> None:
    schema = object_schema({"x": spec}, [])
    with pytest.raises(ToolFailure) as caught:
        validate_arguments(schema, {"x": value})
    assert (caught.value.code, caught.value.message) == ("arguments", message)


def test_untyped_and_union_typed_values_pass() -> None:
    schema = object_schema({"x": {}, "y": {"type": ["integer", "null"]}, "z": True}, [])
    assert validate_arguments(schema, {"x": [1], "y": None, "z": "any"}) == {
        "x": [1],
        "y": None,
        "z": "any",
    }
    assert validate_arguments(schema, {"y": 3.0}) == {"y": 3}
