"""What a process child leaves behind, found and killed: the last step of its stop.

A child's descendants can outlive it: in its process group, outside it (`setsid`), or
re-parented to the fork server (a subreaper) or to init. `ProcessHandle` notes the
descendants outside the group before it sends SIGTERM (`outside_group`), kills those
that linger afterwards (`kill_procs`), and once the child is gone kills the rest of its
tree (`sweep`: its group, and orphans carrying its `PHLOEM_PROCESS_ID` marker).
"""

from __future__ import annotations

import contextlib

import psutil

from phloem.base.logs import get_logger
from phloem.supervision.proctree import (
    descendants,
    has_marker,
    kill_all,
    proc_table,
    wait_gone as _wait_gone,
)

log = get_logger("phloem.supervision.process")

LEFTOVER_WAIT_S = 2.0
"""How long a stop waits for killed leftover descendants to disappear."""


def outside_group(pid: int) -> list[psutil.Process]:
    """`pid`'s current descendants outside its process group (psutil handles, which
    guard against pid reuse when they are killed later)."""
    table = proc_table()
    out = []
    for p in descendants(table, [pid]):
        if table.get(p, (0, pid, False))[1] != pid:
            with contextlib.suppress(psutil.Error):
                out.append(psutil.Process(p))
    return out


def kill_procs(procs: list[psutil.Process]) -> None:
    """SIGKILL the given processes that still run, and wait for them to go."""
    alive = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
                alive.append(proc.pid)
    if alive:
        wait_gone(alive)


def sweep(pid: int, marker: str, *, server_pid: int | None, tracked: set[int]) -> int:
    """Kill and await what is left of the exited child `pid`: its process group, and
    orphans (children of the fork server `server_pid`, or of anyone if it is gone) that
    carry `marker` — with all their descendants. `tracked` pids (other children of the
    fork server) are never roots. Returns how many processes were killed."""
    table = proc_table()
    roots = [
        p
        for p, (ppid, pgid, zombie) in table.items()
        if not zombie
        and p != pid
        and p not in tracked
        and (pgid == pid or ((ppid == server_pid or server_pid is None) and has_marker(p, marker)))
    ]
    found = descendants(table, roots)
    if found:
        log.info("process_leftovers_killed", handle=marker, count=len(found))
        kill_all(found)
        wait_gone(found)
    return len(found)


def wait_gone(pids: list[int], timeout: float = LEFTOVER_WAIT_S) -> bool:
    """`proctree.wait_gone`, logged when some of `pids` outlive `timeout`."""
    if _wait_gone(pids, timeout):
        return True
    log.warning("process_leftovers_still_running", pids=pids)
    return False
