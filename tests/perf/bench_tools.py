"""Benchmark: the coding tools against ripgrep, GNU grep, GNU diff and raw Python I/O.

- grep (literal, regex) over a generated tree of `FILES` files vs `rg` (the ripgrep
  wheel's binary) and GNU `grep -rn`, all with warm page caches, same patterns, same tree;
  ours as it runs (sharded over the cores: the calling thread and fork-server children)
  and, for comparison, in one thread; those three are timed in turn, best of 3 each.
  The tree is `FILES` x `FILE_BYTES` (20,000 x 10 KiB = ~200 MB); set PHLOEM_BENCH_SCALE
  (0 < s <= 1) to shrink it on a slow machine, the rows then say so.
- read (first 2,000 lines, numbered), edit (one exact replacement: ledger check, match,
  atomic write, diff) and diff (one changed line) of a 100,000-line file, vs a raw
  read+decode, a raw replace+write, and GNU `diff -u`.
- walk of the tree with a 200-rule .gitignore vs `rg --files` honouring the same file.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phloem.tools import OutputBudget, ToolContext, Workspace, grep as grep_module
from phloem.tools.diff import unified_diff
from phloem.tools.edit import EditTool
from phloem.tools.grep import GrepTool
from phloem.tools.read import ReadTool
from phloem.tools.walk import WalkFilter, WalkResult, walk
from tests.perf.common import row

FILES = 20_000
FILE_BYTES = 10 * 1024
DIRS = 200
BIG_LINES = 100_000
IGNORE_RULES = 200
LITERAL = "needle_literal_42"
REGEX = r"fn_[a-z]+_\d{3}\("
REGEX_NO_LITERAL = r"[f]n[_][a-z]+[_]\d{3}[(]"
"""Same matches, but no literal run to prefilter by: every file goes through RE2."""
GREP_TARGET = 3.0
WORDS = ["alpha", "beta", "gamma", "delta", "value", "index", "count", "buffer", "node", "item"]


def _scale() -> float:
    raw = os.environ.get("PHLOEM_BENCH_SCALE", "1")
    value = float(raw)
    if not 0 < value <= 1:
        raise ValueError("PHLOEM_BENCH_SCALE must be > 0 and <= 1")
    return value


def _rg() -> str:
    beside = Path(sys.executable).with_name("rg")
    found = str(beside) if beside.exists() else shutil.which("rg")
    if not found:
        raise RuntimeError("rg not found (install the ripgrep wheel)")
    return found


def _make_tree(root: Path, files: int) -> int:
    """Write `files` files of ~FILE_BYTES; return how many regex-matching lines exist."""
    rng = random.Random(7)
    lines = []
    for i in range(400):
        words = " ".join(rng.choice(WORDS) for _ in range(6))
        lines.append(f"    let {words} = compute({i}, {rng.randint(0, 999)});\n")
    block = "".join(lines)
    per_dir = max(files // DIRS, 1)
    planted = 0
    for index in range(files):
        directory = root / f"pkg{index // per_dir:03d}"
        if index % per_dir == 0:
            directory.mkdir(parents=True, exist_ok=True)
        start = (index * 37) % (len(block) - FILE_BYTES) if len(block) > FILE_BYTES else 0
        body = (block * 2)[start : start + FILE_BYTES]
        body = body[: body.rfind("\n") + 1]
        if index % 97 == 0:
            body += f"fn_{WORDS[index % len(WORDS)]}_{index % 1000:03d}(x) // {LITERAL}\n"
            planted += 1
        (directory / f"mod{index:05d}.rs").write_text(body)
    return planted


def _best(fn: Callable[[], Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _run_quiet(argv: list[str], cwd: Path) -> None:
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _interleaved(*fns: Callable[[], Any], repeat: int = 3) -> list[float]:
    """The best time of each of `fns`, run in turn `repeat` times (so a change in the
    machine's load hits them alike)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for index, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def _one_thread(grep: GrepTool, args: dict[str, Any], ctx: ToolContext) -> None:
    """The same search without shard children."""
    sharding = grep_module.SHARD_MIN_FILES
    grep_module.SHARD_MIN_FILES = sys.maxsize
    try:
        grep.run(args, ctx)
    finally:
        grep_module.SHARD_MIN_FILES = sharding


def _grep_rows(tree: Path, files: int, planted: int, scaled: str) -> list[dict[str, Any]]:
    ctx = ToolContext(workspace=Workspace(tree), budget=OutputBudget(10**9))
    grep = GrepTool()
    rg = _rg()
    rows = []
    for label, args, rg_args, gnu_args in (
        (
            "literal",
            {"pattern": LITERAL, "literal": True, "max_results": 10_000},
            ["-F", LITERAL],
            ["-F", LITERAL],
        ),
        ("regex", {"pattern": REGEX, "max_results": 10_000}, ["-e", REGEX], ["-P", REGEX]),
        (
            "regex without literal",
            {"pattern": REGEX_NO_LITERAL, "max_results": 10_000},
            ["-e", REGEX_NO_LITERAL],
            ["-P", REGEX_NO_LITERAL],
        ),
    ):
        result = grep.run(args, ctx)
        if result.get("match_count") != planted:
            raise RuntimeError(f"grep {label} found {result.get('match_count')}, want {planted}")
        ours, floor, single = _interleaved(
            lambda a=args: grep.run(a, ctx),  # type: ignore[misc]
            lambda r=rg_args: _run_quiet([rg, "-n", *r, "."], tree),  # type: ignore[misc]
            lambda a=args: _one_thread(grep, a, ctx),  # type: ignore[misc]
        )
        gnu = _best(lambda g=gnu_args: _run_quiet(["grep", "-rn", *g, "."], tree), 1)  # type: ignore[misc]
        name = f"grep {label}, {files} files{scaled}"
        rows.append(row(name, ours, "s", "ripgrep", floor, GREP_TARGET))
        rows.append(row(f"{name}, one thread (no shards)", single, "s", "ripgrep", floor, None))
        rows.append(row(f"{name}, GNU grep", gnu, "s", "ripgrep", floor, None))
    return rows


def _file_rows(scratch: Path) -> list[dict[str, Any]]:
    root = scratch / "big"
    root.mkdir()
    text = "".join(
        f"line {i}: {WORDS[i % len(WORDS)]} = {i * 7 % 1000}\n" for i in range(BIG_LINES)
    )
    target = root / "big.txt"
    target.write_text(text)
    changed = text.replace("line 50000: ", "line 50000 (edited): ", 1)
    (root / "big2.txt").write_text(changed)
    ctx = ToolContext(workspace=Workspace(root), budget=OutputBudget(10**12))
    read, edit = ReadTool(), EditTool()
    rows = []
    ours = _best(lambda: read.run({"path": "big.txt"}, ctx), 5)
    floor = _best(lambda: target.read_bytes().decode().split("\n"), 5)
    rows.append(
        row("read 100,000-line file (2,000-line window)", ours, "s", "raw read", floor, None)
    )

    state = {"flip": False}

    def one_edit() -> None:
        old, new = ("line 50000: ", "line 50000 (edited): ")
        if state["flip"]:
            old, new = new, old
        state["flip"] = not state["flip"]
        result = edit.run({"path": "big.txt", "old_text": old, "new_text": new}, ctx)
        if "error" in result:
            raise RuntimeError(result)

    read.run({"path": "big.txt", "limit": 1}, ctx)
    ours = _best(one_edit, 4)

    def raw_edit() -> None:
        data = target.read_bytes().decode().replace("line 50000: ", "line 50000: ", 1)
        (root / "raw.txt").write_bytes(data.encode())

    floor = _best(raw_edit, 4)
    rows.append(row("edit 100,000-line file", ours, "s", "raw replace+write", floor, None))
    ours = _best(lambda: unified_diff(text, changed, "big.txt"), 5)
    floor = _best(lambda: _run_quiet(["diff", "-u", "big.txt", "big2.txt"], root), 5)
    rows.append(row("diff 100,000-line file, one change", ours, "s", "GNU diff -u", floor, None))
    return rows


def _walk_rows(tree: Path, files: int, scaled: str) -> list[dict[str, Any]]:
    rules = [f"*.tmp{i}" if i % 3 else f"/pkg{i:03d}/mod*{i}.rs" for i in range(IGNORE_RULES - 2)]
    rules += ["build/", "!important.tmp1"]
    (tree / ".gitignore").write_text("\n".join(rules) + "\n")
    root = os.path.realpath(tree)

    def ours() -> int:
        flt = WalkFilter(respect_gitignore=True, max_results=10**6, max_visited=10**6)
        return sum(1 for _ in walk(root, ".", flt, WalkResult()))

    kept = ours()
    seconds = _best(ours)
    rg = _rg()
    floor = _best(lambda: _run_quiet([rg, "--files", "--no-require-git", "."], tree))
    (tree / ".gitignore").unlink()
    name = f"walk {files} files, {IGNORE_RULES}-rule .gitignore ({kept} kept){scaled}"
    return [row(name, seconds, "s", "rg --files", floor, None)]


def run() -> list[dict[str, Any]]:
    scale = _scale()
    files = max(int(FILES * scale), DIRS)
    scaled = "" if scale == 1 else f" (scaled x{scale})"
    with tempfile.TemporaryDirectory(prefix="phloem-bench-tools-") as scratch:
        tree = Path(scratch, "tree")
        tree.mkdir()
        planted = _make_tree(tree, files)
        _run_quiet(["cat", *[str(p) for p in list(tree.glob("*/*"))[:1]]], tree)
        _run_quiet([_rg(), "-c", "x", "."], tree)  # warm the page cache
        rows = _grep_rows(tree, files, planted, scaled)
        rows += _walk_rows(tree, files, scaled)
        rows += _file_rows(Path(scratch))
    return rows


if __name__ == "__main__":
    for item in run():
        print(item)
