"""The process table as the stop sequences see it: who descends from whom, who is left.

Read from /proc in one pass, so that a whole tree is judged at one moment. Used by the
daemon's process handles (`process`) and by the fork server (`_bootstrap`), so it stays
as light as the server: the standard library only, and no logging.

The RSS watchdog reads one child's tree many times a second, so it walks down from the
child through `/proc/PID/task/TID/children` (`tree_of`: cost grows with the tree, not
with the machine's process count) and reads each member's resident size from
`/proc/PID/statm` (`rss_of`, cheap); only a tree over its cap is read again from
`/proc/PID/smaps_rollup` (`pss_of`: shared pages split among their sharers). A kernel
without the children files falls back to one `proc_table` pass.
"""

from __future__ import annotations

import contextlib
import os
import resource
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


PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_CHILDREN_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def children_of(pid: int) -> list[int]:
    """`pid`'s children now (every thread's): /proc's children files, else `proc_table`."""
    if not _CHILDREN_FILES:
        return [p for p, (ppid, _, _) in proc_table().items() if ppid == pid]
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def tree_of(roots: list[int]) -> list[int]:
    """`roots` and all their descendants now, parents first."""
    if not _CHILDREN_FILES:
        return descendants(proc_table(), roots)
    out: list[int] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        stack.extend(children_of(p))
    return out


def rss_of(pid: int) -> int | None:
    """`pid`'s resident set size in bytes (0 for a zombie); None if it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


def vm_of(pid: int) -> int | None:
    """`pid`'s address-space size in bytes (what `RLIMIT_AS` counts); None if it is gone."""
    sizes = sizes_of(pid)
    return None if sizes is None else sizes[0]


def sizes_of(pid: int) -> tuple[int, int] | None:
    """`pid`'s address-space size and resident set size in bytes, read at one moment;
    None if it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            fields = f.read().split()
        return int(fields[0]) * PAGE_SIZE, int(fields[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


def limit_address_space(pid: int, soft: int) -> None:
    """Set `pid`'s soft `RLIMIT_AS` to `soft` bytes, never above its hard limit (which
    stays: lowering it could not be undone); a process that is gone is skipped."""
    with contextlib.suppress(OSError, ValueError):
        _, hard = resource.prlimit(pid, resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.prlimit(pid, resource.RLIMIT_AS, (max(0, soft), hard))


def pss_of(pid: int) -> int | None:
    """`pid`'s proportional set size in bytes: its resident pages, each shared page divided
    by the number of processes mapping it (/proc/PID/smaps_rollup). Its RSS where the kernel
    has no rollup (before 4.14); 0 for a zombie; None if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            data = f.read()
    except OSError:  # no rollup, or a zombie (ESRCH): statm answers for both
        return rss_of(pid)
    for line in data.splitlines():
        if line.startswith(b"Pss:"):
            with contextlib.suppress(ValueError, IndexError):
                return int(line.split()[1]) * 1024
    return rss_of(pid)


def parent_of(pid: int) -> int | None:
    """`pid`'s parent, None if it is gone."""
    return _stat_field(pid, 1)


def group_of(pid: int) -> int | None:
    """`pid`'s process group, None if it is gone."""
    return _stat_field(pid, 2)


def _stat_field(pid: int, index: int) -> int | None:
    """Field `index` after the command name in /proc/PID/stat (1 ppid, 2 pgid)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2 :].split(b" ", index + 1)[index])
    except (OSError, ValueError, IndexError):
        return None


def marker_of(pid: int) -> str | None:
    """The `MARKER_ENV` value in `pid`'s environment (the handle it belongs to), if any."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    prefix = f"{MARKER_ENV}=".encode()
    for item in env.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


FREEZE_ROUNDS = 16
"""How many times `freeze_tree` walks a tree that keeps growing before it gives up."""


def freeze_tree(pid: int) -> list[int]:
    """SIGSTOP `pid` and all its descendants, walking again until no new one appears
    (a stopped process can neither fork nor leave its session), so that a following
    SIGKILL reaches the whole tree; the stopped pids."""
    stopped: set[int] = set()
    for _ in range(FREEZE_ROUNDS):
        new = [p for p in tree_of([pid]) if p not in stopped]
        if not new:
            break
        kill_all(new, signal.SIGSTOP)
        stopped.update(new)
    return list(stopped)


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
