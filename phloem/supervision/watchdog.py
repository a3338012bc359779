"""Resident-memory watchdog for process children with a memory cap: the whole tree counts.

`RLIMIT_AS` caps each process's address space, but only per process: a child that forks
helpers gives each a fresh allowance, and memory can be resident without a failing
allocation (a C extension ignoring errors, an exec'd command). So one daemon thread
reads, every `WATCHDOG_INTERVAL_S` seconds, the resident memory of each watched child's
*tree*:

- the child and all its descendants, also those that left its process group or session
  (`setsid`), found through /proc's children files;
- orphans of the tree re-parented to the child's parent (the fork server is a subreaper)
  that are still in the child's process group, or that carry its `PHLOEM_PROCESS_ID`
  marker in their environment (commands exec'd below the child), with their descendants.

The reading is the sum of the members' RSS (pages shared copy-on-write between members
count once per member: an upper bound, never an under-count). Over the cap,
`on_exceeded(total, processes)` is called once and the watch ends. A descendant that
both leaves the group and loses its parent without exec'ing (a pure-Python double fork
with `setsid`) is out of sight, as it is for the stop sequence's sweep. The thread runs
only while something is watched; `reading(pid)` is the latest figure, for snapshots.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from phloem.limits import check_range
from phloem.logs import get_logger
from phloem.supervision.proctree import (
    children_of,
    group_of,
    marker_of,
    parent_of,
    rss_of,
    tree_of,
)

log = get_logger("phloem.supervision.watchdog")

WATCHDOG_INTERVAL_S = 0.1
"""Seconds between two readings of each watched tree."""
WATCHDOG_INTERVAL_RANGE = (0.01, 10.0)

OnExceeded = Callable[[int, int], None]
"""Called with (total RSS of the tree in bytes, number of processes in it)."""


class TreeRss(NamedTuple):
    """One reading of a watched tree."""

    total: int
    processes: int


@dataclass(slots=True)
class _Watch:
    cap: int
    on_exceeded: OnExceeded
    marker: str | None
    parent: int | None
    last: TreeRss | None = None


class RssWatchdog:
    """Calls `on_exceeded` once for a watched pid whose tree's RSS goes over its cap."""

    def __init__(self, interval: float = WATCHDOG_INTERVAL_S) -> None:
        self.interval = float(
            check_range("interval", interval, *WATCHDOG_INTERVAL_RANGE, integer=False)
        )
        self._cond = threading.Condition()
        self._watches: dict[int, _Watch] = {}
        self._thread: threading.Thread | None = None

    def watch(
        self, pid: int, cap: int, on_exceeded: OnExceeded, *, marker: str | None = None
    ) -> bool:
        """Start watching the tree of `pid` (with orphans carrying `marker`); False if
        `pid` no longer exists."""
        check_range("cap", cap, 1, None)
        parent = parent_of(pid)
        if parent is None:
            return False
        with self._cond:
            self._watches[pid] = _Watch(cap, on_exceeded, marker, parent)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="phloem-rss-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        return True

    def unwatch(self, pid: int) -> None:
        with self._cond:
            self._watches.pop(pid, None)
            self._cond.notify_all()

    def reading(self, pid: int) -> TreeRss | None:
        """The latest reading of `pid`'s tree (None before the first, or if unwatched)."""
        with self._cond:
            w = self._watches.get(pid)
            return None if w is None else w.last

    @property
    def watching(self) -> int:
        with self._cond:
            return len(self._watches)

    @property
    def running(self) -> bool:
        with self._cond:
            return self._thread is not None

    def sample(self) -> None:
        """Read every watched tree once (what the thread does each interval)."""
        with self._cond:
            watches = list(self._watches.items())
        strays = _strays(watches)
        for pid, w in watches:
            if rss_of(pid) is None:
                self.unwatch(pid)  # gone: its exit is reported elsewhere
                continue
            reading = tree_rss([pid, *strays.get(pid, ())])
            w.last = reading
            if reading.total <= w.cap:
                continue
            with self._cond:
                if self._watches.get(pid) is not w:
                    continue
                del self._watches[pid]
            log.warning(
                "rss_cap_exceeded",
                pid=pid,
                rss=reading.total,
                processes=reading.processes,
                cap=w.cap,
            )
            try:
                w.on_exceeded(reading.total, reading.processes)
            except Exception:
                log.exception("rss_watchdog_callback_failed", pid=pid)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._watches:
                    self._thread = None
                    return
            self.sample()
            with self._cond:
                if self._watches:
                    self._cond.wait(self.interval)


def tree_rss(roots: list[int]) -> TreeRss:
    """The summed RSS of `roots` and their descendants, and how many processes that is."""
    total = processes = 0
    for p in tree_of(roots):
        rss = rss_of(p)
        if rss is not None:
            total += rss
            processes += 1
    return TreeRss(total, processes)


def _strays(watches: list[tuple[int, _Watch]]) -> dict[int, list[int]]:
    """Watched pid -> its tree's orphans now under its parent (see the module docstring)."""
    roots = {pid for pid, _ in watches}
    by_marker = {w.marker: pid for pid, w in watches if w.marker is not None}
    out: dict[int, list[int]] = {}
    for parent in {w.parent for _, w in watches if w.parent is not None}:
        for p in children_of(parent):
            if p in roots:
                continue
            owner = group_of(p)
            if owner not in roots:
                owner = by_marker.get(marker_of(p) or "")
            if owner is not None:
                out.setdefault(owner, []).append(p)
    return out
