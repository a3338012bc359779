"""ls, find and grep under a symlink-swap race: while another process keeps swapping a
directory inside the root for a symlink to a directory outside it, no call may return a
name or content from outside (issue 11: 27,639 leaks in ~198,000 calls before the walk
went by directory descriptors)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from phloem.tools import ToolContext, Workspace, default_registry

CANARY = "CANARY7f3a"
QUICK_SECONDS = 2.5
"""How long the race runs in `make test`."""
FULL_CALLS = 198_000
"""The adversarial run's size, for the slow variant."""

SWAPPER = """
import ctypes, os, sys
root, outside, stop = sys.argv[1:4]
sub, link = os.path.join(root, "sub"), os.path.join(root, ".link")
os.symlink(outside, link)
libc = ctypes.CDLL(None, use_errno=True)
at_fdcwd, rename_exchange = -100, 2
a, b = os.fsencode(sub), os.fsencode(link)
swaps = 0
while swaps % 64 or not os.path.exists(stop):
    if libc.renameat2(at_fdcwd, a, at_fdcwd, b, rename_exchange) != 0:
        os.rename(sub, link + ".dir")  # no renameat2: swap in four steps
        os.rename(link, sub)
        os.rename(sub, link)
        os.rename(link + ".dir", sub)
    swaps += 1
if os.path.islink(sub):
    libc.renameat2(at_fdcwd, a, at_fdcwd, b, rename_exchange)
print(swaps)
"""
"""Swaps `sub` (a directory) with `.link` (a symlink to the outside directory) as fast as
it can: one atomic exchange each (renameat2 RENAME_EXCHANGE), so `sub` always exists."""

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("ls", {"max_depth": 4}),
    ("ls", {"path": "sub", "max_depth": 3}),
    ("ls", {"path": "sub/inside.txt"}),
    ("find", {"glob": "*"}),
    ("find", {"glob": "*", "path": "sub", "sort_by": "modified"}),
    ("grep", {"pattern": CANARY}),
    ("grep", {"pattern": CANARY, "path": "sub"}),
    ("grep", {"pattern": CANARY, "path": "sub/inside.txt"}),
    ("grep", {"pattern": CANARY, "path": "sub/deeper/more.txt"}),
]


def _tree(base: Path) -> tuple[Path, Path]:
    root, outside = base / "ws", base / "outside"
    for top, text in ((root / "sub", "plain\n"), (outside, f"{CANARY} content\n")):
        (top / "deeper").mkdir(parents=True)
        (top / "inside.txt").write_text(text)
        (top / "deeper" / "more.txt").write_text(text)
    (outside / f"{CANARY}-name.txt").write_text(f"{CANARY}\n")
    (outside / f"{CANARY}-dir").mkdir()
    (root / "top.txt").write_text("plain\n")
    return root, outside


def race(base: Path, *, seconds: float | None = None, calls: int | None = None) -> dict[str, Any]:
    """Run the tools in a loop (for `seconds`, or `calls` calls) while the swapper runs;
    count calls, swaps and leaks (results holding the canary), with a leak or two shown."""
    root, outside = _tree(base)
    tools = default_registry()
    ctx = ToolContext(workspace=Workspace(root), session="race")
    stop = base / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(root), str(outside), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    made = leaks = 0
    shown: list[str] = []
    deadline = time.monotonic() + seconds if seconds is not None else None
    try:
        while (deadline is None or time.monotonic() < deadline) and (calls is None or made < calls):
            for name, args in CALLS:
                text = json.dumps(tools.run(name, args, ctx))
                made += 1
                if CANARY in text:
                    leaks += 1
                    if len(shown) < 2:
                        shown.append(f"{name} {args}: {text[:240]}")
    finally:
        stop.touch()
        out, _ = swapper.communicate(timeout=10)
    assert swapper.returncode == 0
    return {"calls": made, "swaps": int(out.strip() or 0), "leaks": leaks, "shown": shown}


def _check(counts: dict[str, Any]) -> None:
    print(counts)
    assert counts["swaps"] > 100, counts  # the race really ran alongside the calls
    assert counts["leaks"] == 0, counts


@pytest.mark.timeout(30)
def test_no_tool_returns_anything_from_outside_while_a_directory_is_swapped(
    tmp_path: Path,
) -> None:
    _check(race(tmp_path, seconds=QUICK_SECONDS))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_full_size_race_leaks_nothing(tmp_path: Path) -> None:
    _check(race(tmp_path, calls=FULL_CALLS))


if __name__ == "__main__":  # python -m tests.tools.test_symlink_race [CALLS]
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        print(race(Path(scratch), calls=int(sys.argv[1]) if len(sys.argv) > 1 else FULL_CALLS))
