"""Resident-memory watchdog for process children with a memory cap: the whole tree counts.

`RLIMIT_AS` caps each process's address space, but only per process: a child that forks
helpers gives each an allowance of its own (the tree's address-space budget,
`treebudget`, bounds only a burst between two readings), and memory can be resident
without a failing allocation (a C extension ignoring errors, an exec'd command). So one
daemon thread reads, every `WATCHDOG_INTERVAL_S` seconds — every `NEAR_CAP_INTERVAL_S`
while some tree holds `NEAR_CAP_FRACTION` of its cap or more —, the resident memory of
each watched child's *tree*:

- the child and all its descendants, also those that left its process group or session
  (`setsid`), found through /proc's children files;
- orphans of the tree re-parented to the child's parent (the fork server is a subreaper)
  that are still in the child's process group, or that carry its `PHLOEM_PROCESS_ID`
  marker in their environment (commands exec'd below the child), with their descendants.

The reading is the sum of the members' RSS, which counts a page shared between members
(copy-on-write after a fork, a shared library) once per member. So a tree whose RSS is
over the cap is read again as proportional set sizes (PSS: each shared page divided
among the processes mapping it), and only a PSS sum over the cap is over: a planner that
forks ten helpers sharing its 40 MiB heap costs about 40 MiB, not 400. PSS is read only
then, and at most every `PSS_INTERVAL_S` while the tree stays in that band, as it costs
a walk of each member's page tables (`_confirm`). Over the cap,
`on_exceeded(total, processes)` is called once, with the PSS sum, and the watch ends.
Under the cap, a watch made with `budget=True` hands the tree's address-space budget
out to its members (`treebudget`), which bounds what a burst between two readings can
add.

A descendant that both leaves the group and loses its parent without exec'ing (a
pure-Python double fork with `setsid`) is out of sight, as it is for the stop sequence's
sweep. The thread runs only while something is watched; `reading(pid)` is the latest
figure, for snapshots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from phloem.base.logs import get_logger
from phloem.protocols.limits import check_range
from phloem.supervision.proctree import (
    children_of,
    group_of,
    marker_of,
    parent_of,
    pss_of,
    rss_of,
    sizes_of,
    tree_of,
)
from phloem.supervision.treebudget import share_budget

log = get_logger("phloem.supervision.watchdog")

WATCHDOG_INTERVAL_S = 0.1
"""Seconds between two readings of each watched tree."""
WATCHDOG_INTERVAL_RANGE = (0.01, 10.0)
NEAR_CAP_INTERVAL_S = 0.02
"""Seconds between two readings while some tree is near its cap (never more than the
watchdog's own interval)."""
NEAR_CAP_FRACTION = 0.5
"""A tree holding this fraction of its cap or more is near it."""
PSS_INTERVAL_S = 1.0
"""Seconds a tree's PSS reading stands while its RSS stays over the cap (see `_confirm`)."""

OnExceeded = Callable[[int, int], None]
"""Called with (total RSS of the tree in bytes, number of processes in it)."""


class TreeRss(NamedTuple):
    """One reading of a watched tree: summed RSS, or summed PSS once the RSS is over the
    cap (see the module docstring)."""

    total: int
    processes: int


@dataclass(slots=True)
class _Watch:
    cap: int
    on_exceeded: OnExceeded
    marker: str | None
    parent: int | None
    budget: bool = False  # share the address-space budget among the members
    last: TreeRss | None = None
    pss: TreeRss | None = None  # the latest PSS reading, while the RSS is over the cap
    pss_rss: int = 0  # the RSS sum at that reading
    pss_at: float = 0.0  # and its time (monotonic)


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
        self,
        pid: int,
        cap: int,
        on_exceeded: OnExceeded,
        *,
        marker: str | None = None,
        budget: bool = False,
    ) -> bool:
        """Start watching the tree of `pid` (with orphans carrying `marker`; with
        `budget`, sharing its address-space budget, see `treebudget`); False if `pid` no
        longer exists."""
        check_range("cap", cap, 1, None)
        parent = parent_of(pid)
        if parent is None:
            return False
        with self._cond:
            self._watches[pid] = _Watch(cap, on_exceeded, marker, parent, budget)
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
            members = tree_of([pid, *strays.get(pid, ())])
            sizes = {p: s for p in members if (s := sizes_of(p)) is not None}
            reading = TreeRss(sum(rss for _, rss in sizes.values()), len(sizes))
            if reading.total > w.cap:
                reading = _confirm(w, members, reading)
            else:
                w.pss = None
            w.last = reading
            if reading.total <= w.cap:
                if w.budget:  # from the sizes of this reading: what grew since counts
                    share_budget({p: vm for p, (vm, _) in sizes.items()}, w.cap, reading.total)
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
                    self._cond.wait(self._next_interval())

    def _next_interval(self) -> float:
        """`interval`, or `NEAR_CAP_INTERVAL_S` while some tree is near its cap (under
        the lock)."""
        for w in self._watches.values():
            if w.last is not None and w.last.total >= w.cap * NEAR_CAP_FRACTION:
                return min(self.interval, NEAR_CAP_INTERVAL_S)
        return self.interval


def _confirm(w: _Watch, members: list[int], rss: TreeRss) -> TreeRss:
    """The tree's PSS sum, for an RSS sum over the cap. A PSS reading walks every member's
    page tables (milliseconds for a large process), so while the RSS stays over the cap it
    is taken at most every `PSS_INTERVAL_S`; between two, the figure is the last PSS plus
    the RSS growth since (new pages show in RSS at once), and an estimate over the cap is
    read again at once. Pages that stop being shared without growing the RSS (a member
    writing to its copy-on-write heap) show at the next PSS reading."""
    now = time.monotonic()
    if w.pss is not None and now - w.pss_at < PSS_INTERVAL_S:
        estimate = w.pss.total + max(0, rss.total - w.pss_rss)
        if estimate <= w.cap:
            return TreeRss(estimate, rss.processes)
    w.pss, w.pss_rss, w.pss_at = _sum(members, pss_of), rss.total, now
    return w.pss


def _sum(members: list[int], size_of: Callable[[int], int | None]) -> TreeRss:
    """The summed `size_of` the members still there, and how many they are."""
    total = processes = 0
    for p in members:
        size = size_of(p)
        if size is not None:
            total += size
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
