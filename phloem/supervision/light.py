"""The light actor kind: an `Actor` that owns no thread, run by a small shared pool.

A thread per actor (pykka's model) makes every actor cost a stack, a thread switch per
message and a thread start per restart. A *light* actor is the same `Actor` — the same
handle, exit reasons, exactly-once exit callbacks (monitors, Down), bounded inbox,
owner-bound refs and credit, the same place under a supervisor — scheduled instead:
its inbox, when a message arrives and the actor is not already scheduled, hands the
actor to a pool worker, which handles up to `BATCH` messages in order and hands it back.
An idle light actor holds no thread at all; messages to one actor are still handled one
at a time and in order.

Where each kind is used: pykka threads for the long-lived services and supervisors
(a supervisor blocks while it starts and stops its children; a service may block on
I/O), the light kind for per-request actors that do not block (choose it with the
class attribute `light = True`, or for every actor whose class leaves it unset with
`set_default_kind("light")`). A handler that blocks holds one pool worker for as long
(the pool grows to `MAX_WORKERS`, so blocked handlers do not starve the rest).

Hand-offs are what an ask or a restart costs on threads, so a light actor avoids them:
- an ask to an idle light actor (nothing queued, not running) runs its handler in the
  asking thread, in the actor's context — messages are still one at a time and in order,
  but the ask's timeout then bounds only the wait for a busy actor, not the handler;
- its `on_start` runs in the starting thread (the start waits for it either way);
- a light supervisor that is idle handles the exit of an actor child in the thread the
  child ended on (`tell_inline`), so a crash and its restart are one turn of one thread.
Its handlers otherwise run on pool workers, never on a thread of its own (no thread
name in `stats`), always in the actor's own context (its owner and current actor).
"""

from __future__ import annotations

import contextvars
import os
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from phloem.base.logs import get_logger

log = get_logger("phloem.supervision")

KINDS = ("thread", "light")
"""Actor kinds: `thread` (pykka, a thread each) and `light` (this module's pool)."""
KIND_ENV = "PHLOEM_ACTOR_KIND"
"""The default kind of actors whose class does not choose (`thread` if unset)."""
BATCH = 64
"""Messages one actor handles in a row before the worker turns to the next actor."""
MIN_WORKERS = 2
"""Pool workers kept even when idle."""
MAX_WORKERS = 256
"""Pool workers at most (blocked handlers each hold one)."""
WORKER_IDLE_S = 5.0
"""A worker beyond `MIN_WORKERS` idle this long ends."""

_default_kind = os.environ.get(KIND_ENV, "thread")


def set_default_kind(kind: str) -> str:
    """Make `kind` the default of actors whose class leaves `light` unset; the old one."""
    global _default_kind
    if kind not in KINDS:
        raise ValueError(f"actor kind must be one of {KINDS} (got {kind!r})")
    old, _default_kind = _default_kind, kind
    return old


def default_kind() -> str:
    return _default_kind


def is_light(choice: bool | None) -> bool:
    """Whether an actor whose class says `light = choice` runs light."""
    return choice if choice is not None else _default_kind == "light"


class Pool:
    """Worker threads taking scheduled actors off one queue; grows when every worker is
    busy (up to `max_workers`), shrinks back to `MIN_WORKERS` when idle."""

    def __init__(self, name: str = "light", max_workers: int = MAX_WORKERS) -> None:
        self.name = name
        self.max_workers = max_workers
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers = 0
        self._idle = 0  # workers waiting for a task that no submit has claimed yet

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                spawn = False
            else:
                spawn = self._workers < self.max_workers
                if spawn:
                    self._workers += 1
        self._tasks.put(task)
        if spawn:
            threading.Thread(
                target=self._work, name=f"{self.name}-{self._workers}", daemon=True
            ).start()

    def workers(self) -> int:
        with self._lock:
            return self._workers

    def _work(self) -> None:
        while True:
            try:
                task = self._tasks.get(timeout=WORKER_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0 and self._workers > MIN_WORKERS:
                        self._idle -= 1
                        self._workers -= 1
                        return
                continue
            try:
                task()
            except BaseException:  # a task never ends a worker
                log.exception("light_task_failed")
            # An idle worker holds nothing: what the task reached (an actor, its tree)
            # must not stay alive in this frame until the next task comes.
            del task
            with self._lock:
                self._idle += 1


_pool = Pool()


def pool() -> Pool:
    return _pool


_inbox_lock = threading.Lock()


def _new_inbox_lock() -> None:
    """A forked child gets a lock no thread of the parent may have held at the fork."""
    global _inbox_lock
    _inbox_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_inbox_lock)


class Inbox:
    """A light actor's inbox: a deque, and a put that schedules the actor. The deque is
    made with the first message (an empty one holds a 64-slot block, ~0.6 KiB: a
    waiting run's actors are often never told anything)."""

    __slots__ = ("_items", "_runner")

    def __init__(self, runner: Runner) -> None:
        self._items: deque[Any] | None = None
        self._runner = runner

    def _made(self) -> deque[Any]:
        with _inbox_lock:  # two first puts at once must share one deque
            items = self._items
            if items is None:
                items = self._items = deque()
            return items

    def put(self, envelope: Any) -> None:
        items = self._items
        if items is None:
            items = self._made()
        items.append(envelope)
        self._runner.wake()

    def get(self) -> Any:
        items = self._items
        if items is None:
            raise IndexError("pop from an empty inbox")
        return items.popleft()

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        items = self._items
        return 0 if items is None else len(items)


class Runner:
    """Schedules one light actor: at most one worker runs it at a time, in its own
    context; `scheduled` is held from its start until its inbox is found empty."""

    __slots__ = ("_finished", "_lock", "_scheduled", "actor", "context")

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.context = contextvars.Context()
        self._lock = threading.Lock()
        self._scheduled = True  # the start runs first
        self._finished = False

    def start(self, setup: Callable[[], None]) -> None:
        """Run `setup` (the actor's on_start and context) here, then its first messages."""
        self.context.run(setup)
        if self.actor.actor_stopped.is_set():
            self.context.run(self._finish)
            return
        self._release()

    def wake(self) -> None:
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        _pool.submit(self._run)

    def _release(self) -> None:
        """Hand the actor back; schedule it again at once if a message came meanwhile."""
        inbox = self.actor.actor_inbox
        with self._lock:
            if not inbox._items and not self.actor.actor_stopped.is_set():
                self._scheduled = False
                return
        _pool.submit(self._run)

    def ask_inline(self, message: Any) -> tuple[bool, Any]:
        """Handle `message` here if the actor is idle: (True, reply), else (False, None)
        (the caller queues it). A handler's exception is raised here."""
        with self._lock:
            if self._scheduled:
                return False, None
            self._scheduled = True
        try:
            return True, self.context.run(self._handle_inline, message)
        finally:
            self._release()

    def run_inline(self, handler: Callable[..., Any], *args: Any) -> bool:
        """Run `handler(*args)` here as the actor's handling of a told message, if the
        actor is idle (a failure fails the actor, as a told message's does); False when
        it is busy or stopped (the caller queues the message instead)."""
        with self._lock:
            if self._scheduled or self.actor.actor_stopped.is_set():
                return False
            self._scheduled = True
        try:
            self.context.run(self._run_here, handler, args)
        finally:
            self._release()
        return True

    def _run_here(self, handler: Callable[..., Any], args: tuple[Any, ...]) -> None:
        actor = self.actor
        handle_message(actor, handler, args, None)
        if actor.actor_stopped.is_set():
            self._finish()

    def _handle_inline(self, message: Any) -> Any:
        actor = self.actor
        if actor.actor_stopped.is_set():
            raise _Stopped
        try:
            return actor._handle_receive(message)
        finally:
            if actor.actor_stopped.is_set():  # it stopped itself: finish in this thread
                self._finish()

    def _run(self) -> None:
        if self.context.run(self._drain):
            self._release()  # out of the context first: the next run may enter it at once

    def _drain(self) -> bool:
        """Up to `BATCH` messages; False once the actor has stopped (and finished)."""
        actor = self.actor
        inbox = actor.actor_inbox
        for _ in range(BATCH):
            if actor.actor_stopped.is_set():
                break
            try:
                envelope = inbox.get()
            except IndexError:
                break
            handle_message(actor, actor._handle_receive, (envelope.message,), envelope.reply_to)
        if actor.actor_stopped.is_set():
            self._finish()
            return False
        return True

    def _finish(self) -> None:
        """The actor stopped: answer what waits in its inbox, then report its exit."""
        if self._finished:
            return
        self._finished = True
        actor = self.actor
        try:
            actor._actor_loop_teardown()
        finally:
            handle = actor._phloem_handle
            if handle is not None:
                handle._on_loop_exit()


def tell_inline(actor: Any, message: Any) -> bool:
    """Handle told `message` here if `actor` is an idle light actor (`run_inline`);
    False for any other actor, or a busy one."""
    if not getattr(actor, "_is_light", False):
        return False
    runner: Runner = actor.actor_inbox._runner
    return runner.run_inline(actor._handle_receive, message)


def run_inline(actor: Any, handler: Callable[..., Any], *args: Any) -> bool:
    """Run `handler(*args)` (one of `actor`'s handlers) here as the handling of a told
    message, if `actor` is an idle light actor: what telling it a message that its
    `on_receive` passes to that handler does, without the message. False for any other
    actor, or a busy one (then the caller tells the message)."""
    if not actor._is_light:
        return False
    runner: Runner = actor.actor_inbox._runner
    return runner.run_inline(handler, *args)


class _Stopped(Exception):
    """The actor stopped before an inline ask could be handled."""


def ask_inline(actor: Any, message: Any) -> tuple[bool, Any]:
    """`Runner.ask_inline` of a light actor; raises `LookupError` if it has stopped."""
    try:
        return actor.actor_inbox._runner.ask_inline(message)  # type: ignore[no-any-return]
    except _Stopped:
        raise LookupError("stopped") from None


def handle_envelope(actor: Any, envelope: Any) -> None:
    """One queued message, as pykka's loop handles it (`handle_message`)."""
    handle_message(actor, actor._handle_receive, (envelope.message,), envelope.reply_to)


def handle_message(
    actor: Any, handler: Callable[..., Any], args: tuple[Any, ...], reply_to: Any
) -> None:
    """`handler(*args)` as pykka's loop handles a message: the reply (or the exception)
    goes to an ask's future `reply_to`; a tell (no `reply_to`) that raises fails the
    actor (`on_failure`)."""
    try:
        response = handler(*args)
        if reply_to is not None:
            reply_to.set(response)
    except Exception:
        if reply_to is not None:
            reply_to.set_exception()
        else:
            actor._handle_failure(*sys.exc_info())
            try:
                actor.on_failure(*sys.exc_info())
            except Exception:
                actor._handle_failure(*sys.exc_info())
    except BaseException:  # SystemExit and the like stop this actor, not the pool
        actor._stop()


def start(actor: Any, setup: Callable[[], None]) -> None:
    """Run `actor` light: give it a scheduled inbox, then run `setup` (on_start) here."""
    runner = Runner(actor)
    inbox = Inbox(runner)
    actor.actor_inbox = inbox
    actor.actor_ref.actor_inbox = inbox
    runner.start(setup)


__all__ = [
    "BATCH",
    "KINDS",
    "KIND_ENV",
    "MAX_WORKERS",
    "MIN_WORKERS",
    "WORKER_IDLE_S",
    "Pool",
    "default_kind",
    "is_light",
    "pool",
    "run_inline",
    "set_default_kind",
    "start",
]
