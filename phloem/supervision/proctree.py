"""The process table as the stop sequences see it: who descends from whom, who is left.

Read from /proc in one pass, so that a whole tree is judged at one moment. Used by the
daemon's process handles (`process`) and by the fork server (`_bootstrap`), so it stays
as light as the server: the standard library only, and no logging.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from phloem.supervision.childwire import MARKER_ENV

ProcTable = dict[int, tuple[int, int, bool]]
"""pid -> (ppid, pgid, is_zombie)."""


def proc_table() -> ProcTable:
    """Every visible process: pid -> (ppid, pgid, is_zombie), read from /proc in one pass."""
    table: ProcTable = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            fields = data[data.rindex(b")") + 2 :].split(b" ", 4)
            table[int(name)] = (int(fields[1]), int(fields[2]), fields[0] == b"Z")
        except (OSError, ValueError, IndexError):
            continue
    return table


def descendants(table: ProcTable, roots: list[int]) -> list[int]:
    """`roots` and all their descendants in `table`, parents first."""
    children: dict[int, list[int]] = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    out: list[int] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        stack.extend(children.get(p, ()))
    return out


def has_marker(pid: int, marker: str) -> bool:
    """True if `pid`'s environment carries `MARKER_ENV=marker` (the handle it belongs to)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in env.split(b"\0")


def kill_all(pids: list[int], sig: int = signal.SIGKILL) -> None:
    """Send `sig` to each of `pids` (those already gone are skipped)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] != b"Z"


def wait_gone(pids: list[int], timeout: float) -> bool:
    """Wait until none of `pids` runs (zombies count as gone); False on timeout."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        if not any(running(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)  # polling a process we do not parent; nothing to wait on
        delay = min(delay * 2, 0.05)
