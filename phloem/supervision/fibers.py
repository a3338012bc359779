"""Fibers: work that waits without owning a thread.

A waiting agent run used to hold an OS thread blocked in its model call — a stack, a
thread start, and a place in the machine's `pid_max`. A *fiber* is a greenlet run by one
of a few shared hub threads: where it would block it calls `wait(future)`, which parks it
(its stack is kept on the heap, a few KiB) and hands the hub to the next ready fiber; the
future's completion, from whatever thread, queues the fiber back on its hub. So 100,000
runs waiting on their models are 100,000 parked greenlets and no thread each.

    fiber = fibers.spawn(work, "agent-run:x", on_done)   # `work()` runs on a hub
    ...
    response = fibers.wait(model.submit(request))         # in the fiber: parks it
    answer = fibers.offload(tool.run, args, ctx)          # blocking code: a pool thread

Outside a fiber the same calls block the calling thread (`wait` is `future.result`,
`offload` calls at once), so code on the wait path works unchanged on threads.

The rule a fiber obeys: block only through `wait` or `offload`. A fiber that blocks any
other way (a `time.sleep`, a socket read, a lock another fiber holds) stalls every fiber
of its hub until it returns; `offload` is for such code (user tools, models with only a
blocking `generate`). A fiber must not hold a lock across a `wait`: another fiber of the
same hub that takes it would block the hub (an `RLock` would even let it in, being the
same thread). Loud, not silent: a slice longer than `LONG_SLICE_S` is logged once per
fiber (`fiber_slice_long`), and new fibers are not placed on a hub whose current slice
has run longer than `STALL_S` (more hubs start, up to `MAX_HUBS`).

Bounded: at most `MAX_FIBERS` live fibers (`backpressure` past it), `MAX_HUBS` hubs,
and `OFFLOAD_WORKERS` threads for offloaded calls (more calls queue for a free one).
"""

from __future__ import annotations

import contextvars
import itertools
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, TimeoutError as FutureTimeout
from queue import SimpleQueue
from typing import Any, TypeVar

import greenlet

from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision import timers
from phloem.supervision.light import Pool

log = get_logger("phloem.supervision.fibers")

T = TypeVar("T")

HUBS = 2
"""Hub threads started on first use (one per core of this machine's size)."""
MAX_HUBS = 8
"""Hub threads at most: more start only while every hub is stalled."""
STALL_S = 0.05
"""A hub whose current slice has run this long takes no new fiber."""
LONG_SLICE_S = 1.0
"""A slice this long is logged (once per fiber): it blocked outside `wait`/`offload`."""
MAX_FIBERS = 250_000
"""Live fibers at most in this process."""
OFFLOAD_WORKERS = 256
"""Threads running offloaded blocking calls at most (more calls wait for one)."""


class _Greenlet(greenlet.greenlet):  # type: ignore[misc]
    """A fiber's greenlet: knows its fiber, so `wait` can tell a fiber from a thread."""

    fiber: Fiber


class Fiber:
    """One fiber: its name, its hub, whether it has ended."""

    __slots__ = ("_context", "_glet", "_on_done", "_work", "ended", "hub", "long_logged", "name")

    def __init__(
        self,
        name: str,
        hub: _Hub,
        work: Callable[[], None],
        on_done: Callable[[BaseException | None], None] | None,
        context: contextvars.Context,
    ) -> None:
        self.name = name
        self.hub = hub
        self.ended = False
        self.long_logged = False
        self._work = work
        self._on_done = on_done
        self._context = context
        self._glet: _Greenlet | None = None

    def _body(self) -> None:
        error: BaseException | None = None
        try:
            self._work()
        except BaseException as exc:  # the fiber's end, reported to `on_done`
            error = exc
        finally:
            self.ended = True
            _live.release()
        if self._on_done is not None:
            try:
                self._on_done(error)
            except Exception:
                log.exception("fiber_on_done_failed", fiber=self.name)
        elif error is not None:
            log.error("fiber_failed", fiber=self.name, error=type(error).__name__)

    def __repr__(self) -> str:
        return f"<Fiber {self.name!r} {'ended' if self.ended else 'live'}>"


class _Hub:
    """One hub thread: runs the fibers queued on it, one slice at a time."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.ready: SimpleQueue[Fiber] = SimpleQueue()  # fibers to start or resume
        self.slice_started = 0.0  # monotonic start of the running slice; 0.0 when idle
        self.main: greenlet.greenlet | None = None
        self.thread = threading.Thread(target=self._loop, name=f"fiber-hub-{index}", daemon=True)
        self.thread.start()

    def stalled(self, now: float) -> bool:
        started = self.slice_started
        return started != 0.0 and now - started > STALL_S

    def _loop(self) -> None:
        self.main = greenlet.getcurrent()
        ready = self.ready
        while True:
            fiber = ready.get()
            glet = fiber._glet
            if glet is None:  # a new fiber: its greenlet belongs to this thread
                glet = _Greenlet(fiber._body, self.main)
                glet.fiber = fiber
                glet.gr_context = fiber._context
                fiber._glet = glet
            elif glet.dead:
                del fiber, glet
                continue
            self.slice_started = started = time.monotonic()
            try:
                glet.switch()
            except BaseException:  # `_body` catches everything; this is the hub's guard
                log.exception("fiber_hub_failed", fiber=fiber.name)
            finally:
                self.slice_started = 0.0
            took = time.monotonic() - started
            if took > LONG_SLICE_S and not fiber.long_logged:
                fiber.long_logged = True
                log.warning("fiber_slice_long", fiber=fiber.name, seconds=round(took, 3))
            # A waiting hub holds no fiber: an ended run (and its tree) is not kept
            # alive by this frame until the next fiber comes.
            del fiber, glet


class _Live:
    """The count of live fibers, bounded by `MAX_FIBERS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def acquire(self) -> None:
        with self._lock:
            if self.count >= MAX_FIBERS:
                raise PhloemError(
                    ErrorKind.BACKPRESSURE, f"{MAX_FIBERS} fibers are live in this process"
                )
            self.count += 1

    def release(self) -> None:
        with self._lock:
            self.count -= 1


_lock = threading.Lock()
_hubs: list[_Hub] = []
_turn = itertools.count()
_live = _Live()
_offload_pool = Pool("fiber-offload", max_workers=OFFLOAD_WORKERS)


def _hub() -> _Hub:
    """The hub for a new fiber: the next in turn that is not stalled; a new one when
    every hub is (up to `MAX_HUBS`)."""
    with _lock:
        while len(_hubs) < HUBS:
            _hubs.append(_Hub(len(_hubs)))
        now = time.monotonic()
        first = next(_turn)
        for i in range(len(_hubs)):
            hub = _hubs[(first + i) % len(_hubs)]
            if not hub.stalled(now):
                return hub
        if len(_hubs) < MAX_HUBS:
            hub = _Hub(len(_hubs))
            _hubs.append(hub)
            log.info("fiber_hub_added", hubs=len(_hubs))
            return hub
        return _hubs[first % len(_hubs)]


def spawn(
    work: Callable[[], None],
    name: str,
    on_done: Callable[[BaseException | None], None] | None = None,
) -> Fiber:
    """Run `work()` as a fiber in a copy of the caller's context; `on_done(error)` runs
    in the fiber when it ends (error None when `work` returned). `backpressure` when
    `MAX_FIBERS` are live."""
    _live.acquire()
    hub = _hub()
    fiber = Fiber(name, hub, work, on_done, contextvars.copy_context())
    hub.ready.put(fiber)
    return fiber


def current() -> Fiber | None:
    """The fiber running this code; None on a plain thread."""
    glet = greenlet.getcurrent()
    return glet.fiber if isinstance(glet, _Greenlet) else None


def wait(future: Future[T], timeout: float | None = None) -> T:
    """The future's result: in a fiber, parked until it completes (no thread held);
    on a thread, blocking. Raises what the future raises, `TimeoutError` after
    `timeout` seconds (the future goes on)."""
    glet = greenlet.getcurrent()
    if not isinstance(glet, _Greenlet):
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise TimeoutError(f"no result within {timeout} s") from None
    if future.done():
        return future.result()
    _park(glet.fiber, future.add_done_callback, timeout)
    if future.done():
        return future.result()
    raise TimeoutError(f"no result within {timeout} s")


def _park(
    fiber: Fiber, arm: Callable[[Callable[..., None]], object], timeout: float | None
) -> None:
    """Park `fiber` (the running one) until the `resume` that `arm(resume)` hands on is
    called, from any thread, or `timeout` seconds pass: whichever comes first wakes it,
    once."""
    hub = fiber.hub
    ticket = [fiber]  # taken once: by the completion or by the timer

    def resume(_: object = None) -> None:
        try:
            woken = ticket.pop()
        except IndexError:
            return
        hub.ready.put(woken)

    timer = None if timeout is None else timers.call_later(max(0.0, timeout), resume)
    arm(resume)
    assert hub.main is not None
    hub.main.switch()
    if timer is not None:
        timer.cancel()


def offload(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, which may block: in a fiber, run on an offload thread (in a copy of
    the fiber's context) while the fiber is parked; on a thread, called right here."""
    if current() is None:
        return fn(*args)
    return wait(submit_blocking(fn, *args))


def submit_blocking(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Start `fn(*args)` on an offload thread, in a copy of this context; its future."""
    done: Future[T] = Future()
    context = contextvars.copy_context()

    def job() -> None:
        if not done.set_running_or_notify_cancel():
            return  # cancelled before it started
        try:
            done.set_result(context.run(fn, *args))
        except BaseException as exc:  # handed to the waiter, raised there
            done.set_exception(exc)

    _offload_pool.submit(job)
    return done


_latch_lock = threading.Lock()


class Latch:
    """A one-shot flag a fiber can wait on without a thread (a `threading.Event` that
    is set once): `set()`, `is_set()`, `wait(timeout) -> bool`. Light where a run holds
    one while it waits: no `Condition` (a `Future`'s costs ~1 KiB); a fiber's wait parks
    on a callback, and only a thread's wait makes an `Event` to block on."""

    __slots__ = ("_event", "_is_set", "_wakers")

    def __init__(self) -> None:
        self._is_set = False
        self._wakers: list[Callable[[], None]] | None = None  # parked fibers' resumes
        self._event: threading.Event | None = None  # made for a thread that waits

    def set(self) -> None:
        with _latch_lock:
            if self._is_set:
                return
            self._is_set = True
            wakers, self._wakers = self._wakers, None
            event = self._event
        if event is not None:
            event.set()
        for wake in wakers or ():
            wake()

    def is_set(self) -> bool:
        return self._is_set

    def wait(self, timeout: float | None = None) -> bool:
        if self._is_set:
            return True
        glet = greenlet.getcurrent()
        if not isinstance(glet, _Greenlet):
            with _latch_lock:
                if self._is_set:
                    return True
                event = self._event
                if event is None:
                    event = self._event = threading.Event()
            return event.wait(timeout)
        woken: list[Callable[[], None]] = []
        _park(glet.fiber, lambda resume: self._arm(resume, woken), timeout)
        if woken:  # kept until set: after a timeout, forget it
            with _latch_lock:
                if self._wakers is not None and woken[0] in self._wakers:
                    self._wakers.remove(woken[0])
        return self._is_set

    def _arm(self, resume: Callable[[], None], kept: list[Callable[[], None]]) -> None:
        """`resume()` once set: at once if it is set already."""
        with _latch_lock:
            if not self._is_set:
                if self._wakers is None:
                    self._wakers = []
                self._wakers.append(resume)
                kept.append(resume)
                return
        resume()

    def __repr__(self) -> str:
        return f"<Latch {'set' if self._is_set else 'unset'}>"


def stats() -> dict[str, int]:
    """Fibers live, hubs started, offload threads (for snapshots and benchmarks)."""
    with _lock:
        hubs = len(_hubs)
    return {"fibers": _live.count, "hubs": hubs, "offload_threads": _offload_pool.workers()}


__all__ = [
    "HUBS",
    "LONG_SLICE_S",
    "MAX_FIBERS",
    "MAX_HUBS",
    "OFFLOAD_WORKERS",
    "STALL_S",
    "Fiber",
    "Latch",
    "current",
    "offload",
    "spawn",
    "stats",
    "submit_blocking",
    "wait",
]


def _forget_after_fork() -> None:
    """A forked child has none of the parent's hub threads: start its own on first use."""
    global _latch_lock, _lock
    _lock = threading.Lock()
    _latch_lock = threading.Lock()
    _hubs.clear()
    _live.__init__()  # type: ignore[misc]


os.register_at_fork(after_in_child=_forget_after_fork)
