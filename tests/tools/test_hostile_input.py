"""Hostile input never raises out of a tool: lone surrogates are `arguments` failures, and
any unexpected exception in a tool becomes the failure value `exception` (redacted)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from phloem.cli.main import main
from phloem.tools import Tool, ToolContext, Workspace, default_registry, object_schema
from phloem.tools.contract import JSON

pytestmark = pytest.mark.timeout(30)

SURROGATE_PATH = "\udcff/../../etc/passwd"

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read", {"path": SURROGATE_PATH}),
    ("write", {"path": SURROGATE_PATH, "content": "x"}),
    ("edit", {"path": SURROGATE_PATH, "old_text": "a", "new_text": "b"}),
    ("ls", {"path": SURROGATE_PATH}),
    ("find", {"glob": "*", "path": SURROGATE_PATH}),
    ("grep", {"pattern": "root", "path": SURROGATE_PATH}),
    ("bash", {"command": "true", "dir": SURROGATE_PATH}),
    ("grep", {"pattern": "\ud800"}),
    ("write", {"path": "a.txt", "content": "\udfff"}),
    ("find", {"glob": "*.\udcff"}),
]


@pytest.mark.parametrize(("name", "args"), CALLS)
def test_a_lone_surrogate_in_an_argument_is_an_arguments_failure(
    ctx: ToolContext, name: str, args: dict[str, Any]
) -> None:
    result = default_registry().run(name, args, ctx)
    assert result["error"] == "arguments", result
    json.dumps(result, ensure_ascii=False).encode()  # the message itself is encodable


def test_the_workspace_refuses_a_path_that_is_not_unicode(root: Path) -> None:
    from phloem.tools import ToolFailure

    with pytest.raises(ToolFailure) as caught:
        Workspace(root).resolve(SURROGATE_PATH)
    assert caught.value.code == "arguments"


def test_the_cli_answers_a_surrogate_path_with_a_failure_value_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = '{"path": "\\udcff/../../etc/passwd"}'
    assert main(["tool", "run", "read", arguments, "--root", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.err)["error"] == "arguments"  # a failure: on stderr
    assert "Traceback" not in captured.err and captured.out == ""


class _Buggy(Tool):
    name = "buggy"
    description = "raises"
    input_schema = object_schema({"what": {"type": "string"}}, ["what"])
    needs_workspace = False

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        if args["what"] == "recursion":
            raise RecursionError("maximum recursion depth exceeded")
        raise RuntimeError(f"broke on token sk-{'a' * 24} \udcff")


def test_an_unexpected_exception_becomes_the_failure_value_exception() -> None:
    result = _Buggy().run({"what": "runtime"}, ToolContext())
    assert result["error"] == "exception"
    assert result["message"].startswith("RuntimeError: broke on token ")
    assert "a" * 24 not in result["message"]  # redacted
    json.dumps(result, ensure_ascii=False).encode()  # no lone surrogate left in it
    assert _Buggy().run({"what": "recursion"}, ToolContext())["error"] == "exception"


def test_a_file_name_that_is_not_utf8_is_shown_with_a_replacement_character(
    ctx: ToolContext, root: Path
) -> None:
    (root / "ok.txt").write_text("hello\n")
    with open(os.path.join(os.fsencode(root), b"bad-\xff.txt"), "w") as handle:
        handle.write("hello\n")
    tools = default_registry()
    listed = tools.run("ls", {}, ctx)
    assert [e["path"] for e in listed["entries"]] == ["bad-\ufffd.txt", "ok.txt"]
    assert tools.run("find", {"glob": "*.txt"}, ctx)["paths"] == ["bad-\ufffd.txt", "ok.txt"]
    found = tools.run("grep", {"pattern": "hello"}, ctx)
    assert [m["path"] for m in found["matches"]] == ["bad-\ufffd.txt", "ok.txt"]
