"""Resident-memory watchdog for process children with a `max_memory_bytes` cap.

`RLIMIT_AS` stops a child from reserving more address space, but memory can still be
resident without a failing allocation (e.g. a C extension ignoring errors, or a command
that was exec'd). One daemon thread polls the resident set size (psutil) of every watched
process every `WATCHDOG_INTERVAL_S` seconds, and runs only while something is watched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import psutil
import structlog

from phloem.limits import check_range

log = structlog.get_logger("phloem.supervision.watchdog")

WATCHDOG_INTERVAL_S = 0.1
"""Seconds between two readings of each watched process."""
WATCHDOG_INTERVAL_RANGE = (0.01, 10.0)

OnExceeded = Callable[[int], None]


@dataclass(slots=True)
class _Watch:
    proc: psutil.Process
    cap: int
    on_exceeded: OnExceeded


class RssWatchdog:
    """Calls `on_exceeded(rss)` once for a watched pid whose RSS goes over its cap."""

    def __init__(self, interval: float = WATCHDOG_INTERVAL_S) -> None:
        self.interval = float(
            check_range("interval", interval, *WATCHDOG_INTERVAL_RANGE, integer=False)
        )
        self._cond = threading.Condition()
        self._watches: dict[int, _Watch] = {}
        self._thread: threading.Thread | None = None

    def watch(self, pid: int, cap: int, on_exceeded: OnExceeded) -> bool:
        """Start watching `pid`; False if it no longer exists."""
        check_range("cap", cap, 1, None)
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            return False
        with self._cond:
            self._watches[pid] = _Watch(proc, cap, on_exceeded)
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

    @property
    def watching(self) -> int:
        with self._cond:
            return len(self._watches)

    @property
    def running(self) -> bool:
        with self._cond:
            return self._thread is not None

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._watches:
                    self._thread = None
                    return
                watches = list(self._watches.items())
            for pid, w in watches:
                try:
                    rss = w.proc.memory_info().rss
                except psutil.Error:
                    self.unwatch(pid)  # gone: its exit is reported elsewhere
                    continue
                if rss > w.cap:
                    with self._cond:
                        current = self._watches.get(pid)
                        if current is not w:
                            continue
                        del self._watches[pid]
                    log.warning("rss_cap_exceeded", pid=pid, rss=rss, cap=w.cap)
                    try:
                        w.on_exceeded(rss)
                    except Exception:
                        log.exception("rss_watchdog_callback_failed", pid=pid)
            with self._cond:
                if self._watches:
                    self._cond.wait(self.interval)
