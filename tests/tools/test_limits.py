"""Each named limit of the coding tools, tested at its edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from phloem.tools import (
    ToolContext,
    ToolFailure,
    ToolRegistry,
    Workspace,
    bash as bash_module,
    ignorerules,
    outputlimit,
    registry,
    walk as walk_module,
    workspace,
)
from phloem.tools.bash import BashTool
from phloem.tools.read import ReadTool
from phloem.tools.walk import WalkFilter, WalkResult, walk

from .conftest import seed

pytestmark = pytest.mark.timeout(30)


def test_paths_up_to_the_byte_limit_are_accepted(root: Path) -> None:
    ws = Workspace(root)
    limit = workspace.MAX_PATH_BYTES
    with pytest.raises(ToolFailure) as missing:
        ws.resolve("a/" * ((limit - 1) // 2) + "b")  # exactly `limit` bytes
    assert missing.value.code == "missing"
    with pytest.raises(ToolFailure) as too_long:
        ws.resolve("a" * (limit + 1))
    assert too_long.value.code == "arguments"


def test_the_ledger_forgets_its_oldest_entry_past_the_limit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workspace, "MAX_LEDGER_ENTRIES", 2)
    ws = Workspace(root)
    for name in ("a", "b"):
        ws.record("s", name, b"x")
    assert ws.has_read("s", "a", b"x")
    ws.record("s", "c", b"x")
    assert not ws.has_read("s", "a", b"x")
    assert ws.has_read("s", "b", b"x") and ws.has_read("s", "c", b"x")


def test_rules_past_the_limit_are_reported_as_bad(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ignorerules, "MAX_RULES", 2)
    rules = ignorerules.RuleSet(["a", "b", "c"])
    assert rules.rules == ["a", "b"]
    assert [(bad.line, bad.text) for bad in rules.bad] == [(3, "c")]


def test_an_oversized_gitignore_is_skipped_with_a_warning(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_module, "MAX_IGNORE_FILE_BYTES", 8)
    seed(root, {".gitignore": "*.log\n*.tmp\n", "a.log": "", "sub/.gitignore": "*.tmp\n"})
    seed(root, {"sub/b.tmp": ""})
    result = WalkResult()
    flt = WalkFilter(respect_gitignore=True)
    paths = [e.path for e in walk(str(Workspace(root).root), ".", flt, result)]
    assert paths == ["a.log", "sub"]  # the 12-byte root file is skipped, the 6-byte one is not
    assert [(w.code, w.path) for w in result.warnings] == [
        ("walk.ignore_file_too_large", ".gitignore")
    ]


def test_a_command_writing_past_the_capture_limit_is_stopped(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bash_module, "MAX_CAPTURE_BYTES", 64 * 1024)
    result = BashTool(kill_grace_s=0.2).run({"command": "yes", "timeout_ms": 20000}, ctx)
    assert result["output_overflow"] is True
    assert result["killed"] is True or result["signal"] == "SIGTERM"
    assert result["timed_out"] is False
    assert result["stdout_report"]["original_bytes"] > 64 * 1024


def test_bash_timeouts_are_capped_and_the_grace_is_validated() -> None:
    schema = BashTool.input_schema["properties"]["timeout_ms"]
    assert schema["minimum"] == 1
    with pytest.raises(
        ValueError, match=r"^invalid_argument: kill_grace_s must be between 0 and 60$"
    ):
        BashTool(kill_grace_s=61)


def test_a_registry_holds_at_most_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "MAX_TOOLS", 1)
    tools = ToolRegistry([ReadTool()])

    class Other(ReadTool):
        name = "other"

    with pytest.raises(ValueError, match=r"^a registry holds at most 1 tools$"):
        tools.register(Other())


def test_the_budget_forgets_its_least_recently_charged_session_past_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(outputlimit, "MAX_BUDGET_SESSIONS", 2)
    budget = outputlimit.OutputBudget(per_session=10_000)
    for session in ("a", "b", "a", "c"):
        budget.consume(session, budget.reserve(session, 100), 100)
    assert (budget.used("a"), budget.used("b"), budget.used("c")) == (200, 0, 100)
