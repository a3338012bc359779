"""Fibers: parked waits hold no thread, completions from any thread resume them, and
the limits and failures are loud."""

from __future__ import annotations

import functools
import threading
import time
import weakref
from concurrent.futures import Future

import pytest

from phloem.protocols.errors import PhloemError
from phloem.supervision import fibers
from tests.helpers import wait_collected, wait_until

pytestmark = pytest.mark.timeout(60)


def _run(work: object) -> tuple[list[object], threading.Event]:
    out: list[object] = []
    done = threading.Event()

    def on_done(error: BaseException | None) -> None:
        out.append(error)
        done.set()

    fibers.spawn(work, "test", on_done)  # type: ignore[arg-type]
    return out, done


def test_a_thousand_parked_fibers_hold_no_thread_and_resume_from_another_thread() -> None:
    futures: list[Future[int]] = [Future() for _ in range(1_000)]
    results: list[int] = []
    ended = threading.Semaphore(0)
    before = threading.active_count()

    def waiter(f: Future[int]) -> None:
        results.append(fibers.wait(f))

    for f in futures:
        fibers.spawn(functools.partial(waiter, f), "p", lambda e: ended.release())
    deadline = time.monotonic() + 20
    while fibers.stats()["fibers"] < 1_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    # Hubs may start on first use; nothing grows with the parked fibers.
    assert threading.active_count() - before <= fibers.HUBS

    def settle() -> None:
        for i, f in enumerate(futures):
            f.set_result(i)

    threading.Thread(target=settle).start()
    for _ in futures:
        assert ended.acquire(timeout=20)
    assert sorted(results) == list(range(1_000))


def test_wait_times_out_and_raises_what_the_future_raises() -> None:
    seen: list[object] = []

    def work() -> None:
        with pytest.raises(TimeoutError):
            fibers.wait(Future(), timeout=0.05)
        failed: Future[int] = Future()
        failed.set_exception(ValueError("bad"))
        with pytest.raises(ValueError):
            fibers.wait(failed)
        seen.append("ok")

    out, done = _run(work)
    assert done.wait(10)
    assert out == [None] and seen == ["ok"]


def test_offload_runs_blocking_code_on_another_thread_with_the_fibers_context() -> None:
    hub: list[str] = []

    def work() -> None:
        hub.append(threading.current_thread().name)
        hub.append(fibers.offload(lambda: threading.current_thread().name))

    out, done = _run(work)
    assert done.wait(10) and out == [None]
    assert hub[0].startswith("fiber-hub-") and hub[1].startswith("fiber-offload")
    # On a plain thread, offload is a call.
    assert fibers.offload(lambda x: x + 1, 1) == 2 and fibers.current() is None


def test_a_latch_wakes_a_parked_fiber_and_times_out() -> None:
    latch = fibers.Latch()
    got: list[bool] = []

    def work() -> None:
        got.append(fibers.Latch().wait(0.05))
        got.append(latch.wait(10))

    _, done = _run(work)
    time.sleep(0.2)
    latch.set()
    latch.set()  # a second set is no error
    assert done.wait(10) and got == [False, True] and latch.is_set()


def test_a_latch_wakes_every_waiter_fiber_or_thread_and_forgets_timed_out_ones() -> None:
    latch = fibers.Latch()
    got: list[object] = []
    dones = []
    for _ in range(20):  # fibers parked on it, one of them with a timeout that passes
        _, done = _run(lambda: got.append(latch.wait(10)))
        dones.append(done)
    _, timed = _run(lambda: got.append(("timed", latch.wait(0.05))))
    assert timed.wait(10)
    assert got == [("timed", False)]
    wait_until(lambda: latch._wakers is not None and len(latch._wakers) == 20, 10, "parked")
    on_thread: list[bool] = []
    threads = [threading.Thread(target=lambda: on_thread.append(latch.wait(10))) for _ in range(3)]
    for t in threads:
        t.start()
    assert fibers.Latch().wait(0.01) is False  # a thread's wait times out too
    wait_until(lambda: latch._event is not None, 10, "a thread's event")
    latch.set()
    assert all(d.wait(10) for d in dones)
    for t in threads:
        t.join(10)
    assert got[1:] == [True] * 20 and on_thread == [True] * 3
    assert latch._wakers is None and latch.wait(0) and latch.wait()


def test_a_fiber_that_raises_reports_it_to_on_done() -> None:
    def work() -> None:
        raise RuntimeError("boom")

    out, done = _run(work)
    assert done.wait(10)
    assert isinstance(out[0], RuntimeError)


def test_past_max_fibers_a_spawn_is_backpressure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fibers, "MAX_FIBERS", fibers.stats()["fibers"] + 1)
    gate: Future[None] = Future()
    ended = threading.Event()
    fibers.spawn(lambda: fibers.wait(gate), "one", lambda e: ended.set())
    with pytest.raises(PhloemError) as info:
        fibers.spawn(lambda: None, "two")
    assert info.value.kind == "backpressure"
    gate.set_result(None)
    assert ended.wait(10)


def test_a_hub_stalled_by_blocking_code_gets_no_new_fiber() -> None:
    release = threading.Event()
    stalled = threading.Event()

    def blocker() -> None:
        stalled.set()
        release.wait(10)  # blocks its hub: what `offload` is for

    fibers.spawn(blocker, "blocker")
    assert stalled.wait(10)
    time.sleep(fibers.STALL_S * 2)
    names: list[str] = []
    ran = threading.Semaphore(0)
    for _ in range(4):
        fibers.spawn(
            lambda: names.append(threading.current_thread().name), "other", lambda e: ran.release()
        )
    for _ in range(4):
        assert ran.acquire(timeout=10)  # none waited for the blocked hub
    release.set()


class _Held:
    """Something a fiber reaches, watched by a weak reference."""


def _touch(held: _Held, done: threading.Event) -> None:
    done.set()


def test_a_hub_keeps_nothing_of_its_last_fiber_alive() -> None:
    held = _Held()
    alive = weakref.ref(held)
    done = threading.Event()
    ended = threading.Event()
    fiber = fibers.spawn(
        functools.partial(_touch, held, done), "holds-nothing", lambda _: ended.set()
    )
    assert done.wait(10) and ended.wait(10)
    del held, fiber
    wait_collected(alive, "what the hub's last fiber reached")
