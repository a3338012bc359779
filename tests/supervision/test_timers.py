"""The one deadline scheduler: order, cancellation, one thread, its bounds, its failures."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from phloem.protocols.errors import PhloemError
from phloem.supervision import timers
from phloem.supervision.timers import COMPACT_MIN_ENTRIES, MAX_TIMERS_RANGE, Scheduler

pytestmark = pytest.mark.timeout(30)

WAIT_S = 10.0  # generous: a loaded machine is slow, never wrong


@pytest.fixture
def sched() -> Iterator[Scheduler]:
    s = Scheduler(name="test-timers")
    yield s
    s.stop()


def test_callbacks_run_in_deadline_order_on_one_thread(sched: Scheduler) -> None:
    ran: list[tuple[str, str]] = []
    last = threading.Event()
    now = time.monotonic()

    def note(name: str) -> None:
        ran.append((name, threading.current_thread().name))
        if len(ran) == 3:
            last.set()

    sched.call_at(now + 0.06, note, "third")
    sched.call_at(now + 0.02, note, "first")
    sched.call_at(now + 0.04, note, "second")
    assert last.wait(WAIT_S)
    assert ran == [("first", "test-timers"), ("second", "test-timers"), ("third", "test-timers")]
    assert sched.live == 0


def test_a_deadline_in_the_past_runs_at_once(sched: Scheduler) -> None:
    done = threading.Event()
    sched.call_at(time.monotonic() - 5, done.set)
    assert done.wait(WAIT_S)


def test_an_earlier_timer_wakes_the_thread_waiting_for_a_later_one(sched: Scheduler) -> None:
    later, sooner = threading.Event(), threading.Event()
    sched.call_later(3_600, later.set)
    first = threading.Event()
    sched.call_later(0, first.set)  # the thread is running and waits for the hour
    assert first.wait(WAIT_S)
    sched.call_later(0.01, sooner.set)
    assert sooner.wait(WAIT_S) and not later.is_set()


def test_a_cancelled_timer_never_runs(sched: Scheduler) -> None:
    cancelled, after = threading.Event(), threading.Event()
    timer = sched.call_later(0.02, cancelled.set)
    assert timer.scheduled
    assert timer.cancel() is True
    assert timer.cancel() is False and not timer.scheduled
    sched.call_later(0.05, after.set)
    assert after.wait(WAIT_S)
    assert not cancelled.is_set() and sched.live == 0


def test_cancelling_a_timer_that_ran_says_so(sched: Scheduler) -> None:
    done = threading.Event()
    timer = sched.call_later(0, done.set)
    assert done.wait(WAIT_S)
    assert timer.cancel() is False


def test_a_callback_that_raises_is_logged_and_the_next_ones_run(
    sched: Scheduler, capsys: pytest.CaptureFixture[str]
) -> None:
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    sched.call_later(0, boom)
    sched.call_later(0.01, done.set)
    assert done.wait(WAIT_S)
    assert "timer_callback_failed" in capsys.readouterr().err


def test_at_most_max_timers_are_live(sched: Scheduler) -> None:
    small = Scheduler(max_timers=2)
    try:
        first = small.call_later(3_600, lambda: None)
        small.call_later(3_600, lambda: None)
        with pytest.raises(PhloemError) as info:
            small.call_later(3_600, lambda: None)
        assert info.value.kind == "backpressure" and "max_timers 2" in info.value.message
        first.cancel()
        small.call_later(3_600, lambda: None)  # room again
        assert small.live == 2
    finally:
        small.stop()
    for bad in (MAX_TIMERS_RANGE[0] - 1, MAX_TIMERS_RANGE[1] + 1):
        with pytest.raises(ValueError):
            Scheduler(max_timers=bad)


def test_cancelled_entries_do_not_pile_up(sched: Scheduler) -> None:
    """A deadline per request, cancelled when the reply comes: the heap stays at the size
    of what is live."""
    keep = [sched.call_later(3_600, lambda: None) for _ in range(100)]
    for _ in range(20 * COMPACT_MIN_ENTRIES):
        sched.call_later(3_600, lambda: None).cancel()
    assert sched.live == len(keep)
    assert sched.entries <= max(COMPACT_MIN_ENTRIES + 1, 2 * sched.live)


def test_stop_cancels_everything_and_refuses_more(sched: Scheduler) -> None:
    ran = threading.Event()
    timer = sched.call_later(0.05, ran.set)
    sched.stop()
    assert not timer.scheduled and timer.cancel() is False and sched.live == 0
    with pytest.raises(PhloemError) as info:
        sched.call_later(0, ran.set)
    assert info.value.kind == "closed"
    assert not ran.wait(0.2)


def test_the_process_has_one_scheduler() -> None:
    assert timers.scheduler() is timers.scheduler()
    done = threading.Event()
    names: list[str] = []
    timers.call_later(0, lambda: (names.append(threading.current_thread().name), done.set()))
    assert done.wait(WAIT_S) and names == ["phloem-timers"]


def test_a_forked_child_starts_its_own_scheduler() -> None:
    timers.scheduler()  # exists, with its thread, in this process
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread is not here, nor its scheduler
        ok = timers._current is None
        done = threading.Event()
        timers.call_later(0, done.set)
        os._exit(0 if ok and done.wait(WAIT_S) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
