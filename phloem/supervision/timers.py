"""The process's one deadline scheduler: callbacks at a time, on one thread, cancellable.

    timer = timers.call_later(2.5, call.fail, PhloemError(ErrorKind.TIMEOUT, "late"))
    ...
    timer.cancel()          # True if it had not run yet: it never will

Everything in phloem that must act when time passes — a call's deadline in the tree, a
planning await's timeout, a supervisor's restart retry, a Live session's redial, the echo
service's sleep — schedules it here instead of starting a timer thread or keeping a heap
of its own. One thread runs every callback in deadline order, so a callback must be short
and must not block: answer a call, tell an actor, set an event.

Bounded and loud: at most `max_timers` live (scheduled, not yet run or cancelled) timers
at once, else `backpressure`; cancelled entries are dropped from the heap once they are
the larger part of it, so a caller that schedules and cancels at a high rate (a deadline
per request) keeps the heap at the size of what is live. A callback that raises is
logged (`timer_callback_failed`) and the scheduler goes on. The thread starts with the
first timer and is a daemon thread; a process forked from this one starts its own.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range

log = get_logger("phloem.supervision.timers")

DEFAULT_MAX_TIMERS = 1_000_000  # timers live at once (scheduled, not yet run or cancelled)
MAX_TIMERS_RANGE = (1, 10_000_000)
COMPACT_MIN_ENTRIES = 1_024  # below this many entries the heap is never rebuilt


class Timer:
    """One scheduled callback; `cancel()` it while it has not run."""

    __slots__ = ("_args", "_fn", "_scheduler", "_state", "when")

    def __init__(
        self,
        scheduler: Scheduler,
        when: float,
        fn: Callable[..., object],
        args: tuple[Any, ...],
    ) -> None:
        self.when = when  # `time.monotonic()` seconds
        self._scheduler = scheduler
        self._fn = fn
        self._args = args
        self._state = "scheduled"  # then "ran" or "cancelled"

    @property
    def scheduled(self) -> bool:
        """True until it has run or been cancelled."""
        return self._state == "scheduled"

    def cancel(self) -> bool:
        """Keep it from running; False if it already ran or was cancelled."""
        return self._scheduler._cancel(self)

    def __repr__(self) -> str:
        name = getattr(self._fn, "__qualname__", type(self._fn).__name__)
        return f"<Timer {name} {self._state} at {self.when:.3f}>"


class Scheduler:
    """A heap of timers and the one thread that runs them when they are due."""

    def __init__(self, max_timers: int = DEFAULT_MAX_TIMERS, name: str = "phloem-timers") -> None:
        self.max_timers = check_range("max_timers", max_timers, *MAX_TIMERS_RANGE)
        self.name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._live = 0
        self._stopped = False
        self._thread: threading.Thread | None = None

    @property
    def live(self) -> int:
        """Timers scheduled that have neither run nor been cancelled."""
        return self._live

    @property
    def entries(self) -> int:
        """Heap entries, cancelled ones not yet dropped included."""
        return len(self._heap)

    def call_at(self, when: float, fn: Callable[..., object], *args: Any) -> Timer:
        """Run `fn(*args)` on the scheduler's thread once `time.monotonic()` reaches
        `when` (at once if it has); `backpressure` when `max_timers` are live."""
        timer = Timer(self, when, fn, args)
        with self._cond:
            if self._stopped:
                raise PhloemError(ErrorKind.CLOSED, "the timer scheduler is stopped")
            if self._live >= self.max_timers:
                raise PhloemError(
                    ErrorKind.BACKPRESSURE,
                    f"{self._live} timers are scheduled (max_timers {self.max_timers})",
                )
            first = not self._heap or when < self._heap[0][0]
            heapq.heappush(self._heap, (when, next(self._seq), timer))
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            elif first:
                self._cond.notify()
        return timer

    def call_later(self, delay_s: float, fn: Callable[..., object], *args: Any) -> Timer:
        """Run `fn(*args)` on the scheduler's thread in `delay_s` seconds."""
        return self.call_at(time.monotonic() + max(0.0, delay_s), fn, *args)

    def stop(self) -> None:
        """Cancel every timer and end the thread (later `call_at`s raise `closed`)."""
        with self._cond:
            self._stopped = True
            for _, _, timer in self._heap:
                timer._state = "cancelled"
            self._heap.clear()
            self._live = 0
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _cancel(self, timer: Timer) -> bool:
        with self._cond:
            if timer._state != "scheduled":
                return False
            timer._state = "cancelled"
            timer._fn, timer._args = _nothing, ()  # drop what it held
            self._live -= 1
            heap = self._heap
            if len(heap) > COMPACT_MIN_ENTRIES and len(heap) > 2 * self._live:
                self._heap = [e for e in heap if e[2]._state == "scheduled"]
                heapq.heapify(self._heap)
            return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    heap = self._heap
                    while heap and heap[0][2]._state != "scheduled":
                        heapq.heappop(heap)
                    now = time.monotonic()
                    if heap and heap[0][0] <= now:
                        timer = heapq.heappop(heap)[2]
                        timer._state = "ran"
                        self._live -= 1
                        break
                    self._cond.wait(heap[0][0] - now if heap else None)
            try:
                timer._fn(*timer._args)
            except Exception:
                log.exception("timer_callback_failed", timer=repr(timer))
            finally:
                timer._fn, timer._args = _nothing, ()


def _nothing(*_args: Any) -> None:
    return None


_current: Scheduler | None = None
_current_lock = threading.Lock()


def scheduler() -> Scheduler:
    """The process's scheduler (created on first use)."""
    global _current
    current = _current
    if current is None:
        with _current_lock:
            if _current is None:
                _current = Scheduler()
            current = _current
    return current


def call_at(when: float, fn: Callable[..., object], *args: Any) -> Timer:
    """`scheduler().call_at(...)`: run `fn(*args)` once `time.monotonic()` reaches `when`."""
    return scheduler().call_at(when, fn, *args)


def call_later(delay_s: float, fn: Callable[..., object], *args: Any) -> Timer:
    """`scheduler().call_later(...)`: run `fn(*args)` in `delay_s` seconds."""
    return scheduler().call_later(delay_s, fn, *args)


def _forget_after_fork() -> None:
    """A forked child has no scheduler thread: it starts its own on first use."""
    global _current, _current_lock
    _current = None
    _current_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
