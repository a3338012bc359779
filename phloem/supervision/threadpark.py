"""Parked threads for actor loops: a thread whose actor ended waits briefly for the next.

Starting an OS thread (clone, a fresh stack, a new interpreter thread state) is the
largest cost of starting an actor. A supervisor restarts a crashed child right after its
loop ended, so the thread that just ran the old loop is handed the new one instead: the
restart then costs one wake-up instead of a thread start. A thread parks for at most
`PARK_IDLE_S` and at most `MAX_PARKED_THREADS` park at once; past either it ends, so an
idle tree holds no extra threads. Each loop runs in a fresh `contextvars.Context` under
its own thread name, so nothing of one actor's run is seen by the next.
`release_parked` ends the parked threads at once.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable

MAX_PARKED_THREADS = 32
PARK_IDLE_S = 1.0

_lock = threading.Lock()
_parked: list[_Parked] = []


class _Parked:
    """One idle thread and the slot its next job is handed through."""

    __slots__ = ("job", "name", "ready")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.job: Callable[[], None] | None = None
        self.name = ""


def run_parked(job: Callable[[], None], name: str, daemon: bool) -> None:
    """Run `job` on a parked thread if one is free (daemon ones only), else a new one."""
    if daemon:
        with _lock:
            slot = _parked.pop() if _parked else None
        if slot is not None:
            slot.job, slot.name = job, name
            slot.ready.set()
            return
    # The job goes in a slot, not in the thread's args: a `Thread` keeps its args until
    # its target returns, and this target outlives its first job.
    first = _Parked()
    first.job = job
    thread = threading.Thread(target=_work, args=(first, daemon), name=name, daemon=daemon)
    thread.start()


def _work(slot: _Parked, daemon: bool) -> None:
    while True:
        job, slot.job = slot.job, None  # a parked thread keeps nothing of a job it ran
        if job is None:  # woken by `release_parked`: end now
            return
        contextvars.Context().run(job)
        del job
        if not daemon:
            return
        slot = _Parked()
        with _lock:
            if len(_parked) >= MAX_PARKED_THREADS:
                return
            _parked.append(slot)
        if not slot.ready.wait(PARK_IDLE_S):
            with _lock:
                if slot in _parked:  # not taken meanwhile: end
                    _parked.remove(slot)
                    return
            slot.ready.wait()  # taken just as the wait timed out: the job is on its way
        threading.current_thread().name = slot.name


def release_parked() -> int:
    """End every thread parked now, without waiting out `PARK_IDLE_S`; how many there were.

    For a caller that wants no idle thread left at once: a benchmark round that must
    start on a new thread, a test counting threads. A job handed over meanwhile is still
    run (it takes its slot before this does).
    """
    with _lock:
        slots = _parked[:]
        _parked.clear()
    for slot in slots:
        slot.ready.set()  # with no job in its slot: the thread ends
    return len(slots)


def parked_count() -> int:
    """How many threads wait for a job now (for tests and snapshots)."""
    with _lock:
        return len(_parked)
