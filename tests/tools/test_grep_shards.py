"""grep over shards: process children search parts of the file list, the answer is the
one a single thread gives (matches, order, truncation, skipped counts), and a shard
whose child fails is searched by the caller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from phloem.tools import ToolContext, grep as grep_module
from phloem.tools.grep import GrepTool
from phloem.tools.grepsearch import NUL_SCAN_BYTES

from .conftest import seed

pytestmark = pytest.mark.timeout(60)

FILES = 240


def _tree(root: Path) -> None:
    files: dict[str, str] = {}
    for i in range(FILES):
        body = "".join(f"line {j} of {i}\n" for j in range(20))
        if i % 7 == 0:
            body += f"fn_alpha_{i:03d}(x) needle\nneedle again {i}\n"
        files[f"d{i % 9}/f{i:04d}.txt"] = body
    seed(root, files)
    (root / "d0" / "binary.bin").write_bytes(b"needle\x00" + b"x" * NUL_SCAN_BYTES)


def _both(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, args: dict[str, Any]) -> Any:
    monkeypatch.setattr(grep_module, "SHARD_MIN_FILES", 10**9)
    single = GrepTool().run(args, ctx)
    monkeypatch.setattr(grep_module, "SHARD_MIN_FILES", 40)
    monkeypatch.setattr(grep_module.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert grep_module._shard_count(FILES) == 3
    return single, GrepTool().run(args, ctx)


@pytest.mark.parametrize(
    "args",
    [
        {"pattern": r"fn_[a-z]+_\d{3}\(", "max_results": 10_000},
        {"pattern": "needle", "literal": True, "context_lines": 1, "max_results": 10_000},
        {"pattern": "needle", "literal": True, "max_results": 25},  # truncated mid-way
    ],
)
def test_sharded_search_answers_as_one_thread(
    ctx: ToolContext, root: Path, monkeypatch: pytest.MonkeyPatch, args: dict[str, Any]
) -> None:
    _tree(root)
    answered: list[str] = []
    real = grep_module.start_call

    class Spy:
        def __init__(self, call: Any, name: str) -> None:
            self.call, self.name = call, name

        def result(self) -> Any:
            value = self.call.result()
            answered.append(self.name)
            return value

    def spy(fn: Any, arg: Any, **kwargs: Any) -> Any:
        return Spy(real(fn, arg, **kwargs), kwargs["name"])

    monkeypatch.setattr(grep_module, "start_call", spy)
    single, sharded = _both(ctx, monkeypatch, args)
    assert sharded == single
    assert single["match_count"] > 0 and single["skipped_binary"] == 1
    assert answered  # process children did search (all but the one cut short by the cap)


@pytest.mark.parametrize("when", ["start", "answer"])
def test_a_shard_whose_child_fails_is_searched_by_the_caller(
    ctx: ToolContext, root: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    _tree(root)
    calls: list[str] = []

    class Lost:
        def result(self) -> Any:
            raise RuntimeError("the child went away")

    def failing(fn: Any, arg: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["name"])
        if when == "start":
            raise RuntimeError("no child for you")
        return Lost()

    monkeypatch.setattr(grep_module, "start_call", failing)
    single, sharded = _both(ctx, monkeypatch, {"pattern": "needle", "max_results": 10_000})
    assert sharded == single and sorted(calls) == ["grep-shard-1", "grep-shard-2"]


def test_shard_count_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        grep_module.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False
    )
    minimum = grep_module.SHARD_MIN_FILES
    assert grep_module._shard_count(minimum - 1) == 1
    assert grep_module._shard_count(minimum * 2 - 1) == 1
    assert grep_module._shard_count(minimum * 2) == 2
    assert grep_module._shard_count(minimum * 1000) == grep_module.MAX_SHARD_CHILDREN + 1
    monkeypatch.setattr(grep_module.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert grep_module._shard_count(minimum * 1000) == 1
