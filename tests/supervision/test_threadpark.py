"""Parked actor threads: reused for the next actor loop, bounded, and ended when idle."""

from __future__ import annotations

import contextvars
import functools
import threading
import weakref

import pytest

from phloem.supervision import threadpark
from tests.helpers import wait_collected, wait_until

pytestmark = pytest.mark.timeout(60)

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def _idle() -> None:
    wait_until(lambda: threadpark.parked_count() == 0, timeout=threadpark.PARK_IDLE_S + 10)


def test_a_parked_thread_runs_the_next_job_in_a_fresh_context_then_ends_when_idle() -> None:
    _idle()
    ran: list[tuple[int, str, str]] = []
    done = threading.Event()

    def first() -> None:
        ran.append((threading.get_ident(), threading.current_thread().name, _seen.get()))
        _seen.set("first")

    def second() -> None:
        ran.append((threading.get_ident(), threading.current_thread().name, _seen.get()))
        done.set()

    threadpark.run_parked(first, "job-1", daemon=True)
    wait_until(lambda: threadpark.parked_count() == 1)
    threadpark.run_parked(second, "job-2", daemon=True)
    assert done.wait(10)
    assert ran[0][0] == ran[1][0]  # the same thread
    assert [r[1:] for r in ran] == [("job-1", "unset"), ("job-2", "unset")]
    wait_until(lambda: threadpark.parked_count() == 1)
    thread = next(t for t in threading.enumerate() if t.ident == ran[0][0])
    thread.join(threadpark.PARK_IDLE_S + 10)
    assert not thread.is_alive() and threadpark.parked_count() == 0


def test_non_daemon_jobs_never_park_and_parking_stops_at_the_limit() -> None:
    _idle()
    threadpark.run_parked(lambda: None, "plain", daemon=False)
    release = threading.Event()
    started = threading.Barrier(threadpark.MAX_PARKED_THREADS + 2)

    def hold() -> None:
        started.wait(10)
        release.wait(10)

    for i in range(threadpark.MAX_PARKED_THREADS + 1):
        threadpark.run_parked(hold, f"hold-{i}", daemon=True)
    started.wait(10)
    release.set()
    wait_until(lambda: threadpark.parked_count() == threadpark.MAX_PARKED_THREADS)
    _idle()


class _Held:
    """Something a job reaches, watched by a weak reference."""


def _touch(held: _Held, done: threading.Event) -> None:
    done.set()


def test_a_parked_thread_keeps_nothing_of_its_last_job_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _idle()
    # parked for longer than the check takes on a loaded machine (the default second is not)
    monkeypatch.setattr(threadpark, "PARK_IDLE_S", 60.0)
    held = _Held()
    alive = weakref.ref(held)
    done = threading.Event()
    threadpark.run_parked(functools.partial(_touch, held, done), "holds-nothing", daemon=True)
    assert done.wait(10)
    wait_until(lambda: threadpark.parked_count() == 1)  # its thread waits for a next job
    del held
    wait_collected(alive, "what the parked thread's last job reached")
    assert threadpark.release_parked() == 1  # still parked, and now ended


def test_release_parked_ends_the_parked_threads_at_once_and_a_later_job_gets_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _idle()
    monkeypatch.setattr(threadpark, "PARK_IDLE_S", 60.0)  # only a release ends them in time
    together = threading.Barrier(3)  # three jobs at once: three threads, all parked after
    threads: list[threading.Thread] = []
    for i in range(3):
        threadpark.run_parked(
            lambda: (threads.append(threading.current_thread()), together.wait(10)),
            f"release-{i}",
            daemon=True,
        )
    wait_until(lambda: threadpark.parked_count() == 3)
    assert threadpark.release_parked() == 3
    for thread in threads:
        thread.join(10)  # far less than their 60 s park
        assert not thread.is_alive()
    assert threadpark.parked_count() == 0 and threadpark.release_parked() == 0
    after: list[threading.Thread] = []
    ran = threading.Event()
    threadpark.run_parked(
        lambda: (after.append(threading.current_thread()), ran.set()), "after", daemon=True
    )
    assert ran.wait(10) and after[0] not in threads
    wait_until(lambda: threadpark.parked_count() == 1)
    assert threadpark.release_parked() == 1
