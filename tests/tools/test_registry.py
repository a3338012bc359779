"""The tool registry: the seven coding tools, unique names, registration checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from phloem.tools import ToolContext, ToolRegistry, default_registry, run_tool
from phloem.tools.read import ReadTool

pytestmark = pytest.mark.timeout(30)


def test_the_default_registry_holds_the_seven_tools_in_order() -> None:
    registry = default_registry()
    assert registry.names() == ["read", "write", "edit", "bash", "grep", "find", "ls"]
    assert registry.read_only().names() == ["read", "grep", "find", "ls"]
    for tool in registry.tools():
        assert tool.input_schema["additionalProperties"] is False


def test_names_are_unique_and_unknown_tools_fail_as_values(ctx: ToolContext) -> None:
    registry = ToolRegistry([ReadTool()])
    with pytest.raises(ValueError, match=r"^a tool named read is already registered$"):
        registry.register(ReadTool())
    assert registry.run("nope", {}, ctx) == {
        "error": "unknown_tool",
        "message": "no tool named nope",
    }


def test_run_tool_runs_by_name_in_a_root(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    assert run_tool("grep", {"pattern": "hel"}, tmp_path)["match_count"] == 1


def test_registration_checks_the_name_and_the_schema() -> None:
    class Loose(ReadTool):
        name = "loose"
        input_schema = {"type": "object", "properties": {}}

    class BadName(ReadTool):
        name = "no spaces"

    registry = ToolRegistry()
    with pytest.raises(ValueError, match=r"^input_schema of loose must be an object schema"):
        registry.register(Loose())
    with pytest.raises(ValueError, match=r"^name must be 1-64 characters"):
        registry.register(BadName())
    assert len(registry) == 0 and "read" not in registry
