"""`Flag`: an Event whose condition is made only when someone waits on it unset."""

from __future__ import annotations

import threading

import pytest

from phloem.supervision.handle import Flag

pytestmark = pytest.mark.timeout(20)


def test_a_set_flag_is_read_and_waited_on_without_a_condition() -> None:
    flag = Flag()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set() and flag.wait(0) and flag._event is None


def test_an_unset_flag_times_out_then_wakes_a_waiter_when_set() -> None:
    flag = Flag()
    assert flag.wait(0.01) is False
    woke = threading.Event()

    def waiter() -> None:
        if flag.wait(10):
            woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    flag.set()
    thread.join(10)
    assert woke.is_set()
    flag.clear()
    assert not flag.is_set() and flag.wait(0) is False
