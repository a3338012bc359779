from __future__ import annotations

import json
from pathlib import Path

import pytest

from phloem.cli.main import main
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


def test_the_cli_lists_describes_and_runs_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    assert main(["tool", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("read   read-only")
    assert main(["tool", "schema", "grep"]) == 0
    assert json.loads(capsys.readouterr().out)["required"] == ["pattern"]
    assert main(["tool", "run", "read", '{"path": "a.txt"}', "--root", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["content"] == "     1\thello\n"
    assert main(["tool", "run", "read", '{"path": "../a.txt"}', "--root", str(tmp_path)]) == 1
    assert json.loads(capsys.readouterr().out)["error"] == "outside_root"
    assert main(["tool", "run", "read", "{bad", "--root", str(tmp_path)]) == 2
    assert main(["tool", "schema", "nope"]) == 2


def test_the_phloem_command_has_the_tool_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from phloem.cli.main import main as phloem_main

    (tmp_path / "a.txt").write_text("hello\n")
    args = ["tool", "run", "grep", '{"pattern": "hel"}', "--root", str(tmp_path)]
    assert phloem_main(args) == 0
    assert json.loads(capsys.readouterr().out)["match_count"] == 1
    assert phloem_main(["tool", "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 7


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
