"""`phloem tool list | schema | run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phloem.cli.main import main

pytestmark = pytest.mark.timeout(30)


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
    failed = capsys.readouterr()
    assert failed.out == "" and json.loads(failed.err)["error"] == "outside_root"
    args = ["tool", "run", "read", '{"path": "../a.txt"}', "--root", str(tmp_path), "--json"]
    assert main(args) == 1
    failed = capsys.readouterr()
    assert json.loads(failed.out)["error"] == json.loads(failed.err)["error"] == "outside_root"
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
