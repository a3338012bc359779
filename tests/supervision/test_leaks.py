"""Start/stop cycles leave threads and file descriptors where they started."""

from __future__ import annotations

import os
import threading

import pytest

from phloem.supervision import ChildSpec, Supervisor, SupervisorSpec
from tests.supervision.actors import Store

pytestmark = pytest.mark.timeout(60)


def _threads_after(baseline: set[threading.Thread]) -> int:
    """Thread count once threads that are finishing have finished (bounded wait). A
    parked actor thread (`threadpark`) ends within `PARK_IDLE_S`, so the count can also
    drop below the baseline: a leak is a count above it."""
    for thread in threading.enumerate():
        if thread not in baseline:
            thread.join(5)
    return threading.active_count()


def _fds() -> int:
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


def test_a_thousand_actor_start_stop_cycles_leak_no_threads_or_fds() -> None:
    sup = Supervisor.start(SupervisorSpec(), [], name="cycles")
    baseline, fds = set(threading.enumerate()), _fds()
    for i in range(1000):
        sup.start_child(ChildSpec(f"s{i}", Store, restart="temporary"))
        sup.terminate_child(f"s{i}")
    assert sup.count_children().specs == 0
    assert _threads_after(baseline) <= len(baseline)
    assert _fds() == fds


def test_supervisor_start_stop_cycles_leak_no_threads() -> None:
    baseline = set(threading.enumerate())
    for _ in range(200):
        sup = Supervisor.start(SupervisorSpec(), [ChildSpec("a", Store), ChildSpec("b", Store)])
        sup.stop()
    assert _threads_after(baseline) <= len(baseline)
