"""The common handle of every running child: actor, process or supervisor.

A handle is what a supervisor holds, what `monitor` watches and what `ChildInfo.ref`
returns. It records the child's single `ExitReason` and runs exit callbacks exactly once.
"""

from __future__ import annotations

import abc
import contextlib
import enum
import hashlib
import itertools
import os
import secrets
import threading
from collections.abc import Callable
from typing import Literal

import msgspec
import psutil

from phloem.base.logs import get_logger
from phloem.supervision.reasons import ExitReason

log = get_logger("phloem.supervision")

HandleKind = Literal["actor", "process", "supervisor"]
ExitCallback = Callable[[ExitReason], None]


class ChildState(enum.StrEnum):
    """Lifecycle states shown by `phloem tree` (supervisord's vocabulary)."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    EXITED = "exited"
    RESTARTING = "restarting"
    STOPPED = "stopped"  # spec kept, stopped by hand (terminate_child): stays down until started
    UNDEFINED = "undefined"  # spec kept, no process (ended and not restarted, or not started)


class HandleStats(msgspec.Struct, frozen=True):
    """A live reading of one child, for snapshots.

    For a process child with a memory cap, `rss_cap_bytes` is the cap on its tree's
    summed RSS and `tree_rss_bytes` / `tree_processes` the watchdog's latest reading of
    that tree (`rss_bytes` is the child's own RSS). `cpu_s` is the CPU time (user +
    system, seconds) a process child has used so far; `native_thread` is the OS id of an
    actor's or supervisor's thread, whose CPU time the snapshot reads once for all threads.
    """

    pid: int | None = None
    thread: str | None = None
    mailbox_depth: int = 0
    credit_in_use: int = 0
    rss_bytes: int | None = None
    rss_cap_bytes: int | None = None
    tree_rss_bytes: int | None = None
    tree_processes: int | None = None
    node: str | None = None  # a remote child's cluster node (`ip/node-id`)
    cpu_s: float | None = None
    native_thread: int | None = None


def rss_and_cpu(proc: psutil.Process) -> tuple[int, float]:
    """A process's resident memory (bytes) and CPU time so far (user + system seconds),
    read together (`psutil.Error` when it is gone)."""
    with proc.oneshot():
        times = proc.cpu_times()
        return proc.memory_info().rss, times.user + times.system


_id_key = secrets.token_bytes(16)
_id_counter = itertools.count()


def _new_id_key() -> None:
    global _id_key
    _id_key = secrets.token_bytes(16)  # a forked child counts on from the same number


os.register_at_fork(after_in_child=_new_id_key)


def new_handle_id(kind: str) -> str:
    """A unique, unguessable id for a handle (`actor-…`, `process-…`, `supervisor-…`):
    a keyed hash (BLAKE2b, a random key per process) of a counter, as unguessable as 8
    random bytes without a system call per handle (a restart makes one)."""
    n = next(_id_counter).to_bytes(8, "little")
    return f"{kind}-{hashlib.blake2b(n, key=_id_key, digest_size=8).hexdigest()}"


_flag_lock = threading.Lock()


class Flag(threading.Event):
    """A `threading.Event` whose condition is made only when someone waits on an unset
    flag: setting and reading it are an attribute each (a restart makes three, which
    nothing but a start or a stop ever waits on)."""

    __slots__ = ("_event", "_is_set")

    def __init__(self) -> None:  # no Event.__init__: its condition is `_event`'s
        self._is_set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._is_set

    isSet = is_set  # noqa: N815 (threading.Event's old name)

    def __repr__(self) -> str:  # Event's reads the condition it has not made
        return f"<{type(self).__name__}: {'set' if self._is_set else 'unset'}>"

    def _at_fork_reinit(self) -> None:
        self._event = None  # made again on the next wait

    def set(self) -> None:
        self._is_set = True
        event = self._event
        if event is not None:
            event.set()

    def clear(self) -> None:
        self._is_set = False
        event = self._event
        if event is not None:
            event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        if self._is_set:
            return True
        event = self._event
        if event is None:
            with _flag_lock:
                event = self._event
                if event is None:
                    event = self._event = threading.Event()
            if self._is_set:  # set before the event was there to be set
                event.set()
        return event.wait(timeout)


class ChildHandle(abc.ABC):
    """Base of actor, process and supervisor handles.

    Subclasses call `_set_exit(reason)` exactly when the child has fully stopped; the
    first call wins, later ones are ignored, so a kill racing a normal exit cannot produce
    two reasons.
    """

    kind: HandleKind

    def __init__(self, name: str) -> None:
        self.handle_id = new_handle_id(self.kind)
        self.name = name
        self._exit_lock = threading.Lock()
        self._exited = Flag()
        self._exit_reason: ExitReason | None = None
        self._exit_callbacks: list[ExitCallback] = []
        self._state = ChildState.STARTING
        self._forced: ExitReason | None = None
        self._callback_thread: int | None = None
        self._parent: ChildHandle | None = None  # the supervisor that started it, if any
        self._attached: dict[str, ChildHandle] = {}  # live process children of its work

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> ChildState:
        return ChildState.EXITED if self._exit_reason is not None else self._state

    def is_alive(self) -> bool:
        return self._exit_reason is None

    @property
    def exit_reason(self) -> ExitReason | None:
        """The reason it stopped, or None while it runs."""
        return self._exit_reason

    def wait(self, timeout: float | None = None) -> ExitReason | None:
        """Wait for the child to stop; its reason, or None if `timeout` passed first.

        Returns once the exit callbacks (monitors, the supervisor's notice) have run; an
        exit callback that waits on its own handle gets the reason at once.
        """
        if self._exit_reason is not None and self._callback_thread == threading.get_ident():
            return self._exit_reason
        self._exited.wait(timeout)
        return self._exit_reason

    def add_exit_callback(self, callback: ExitCallback) -> None:
        """Call `callback(reason)` once when the child stops (now, if it already has)."""
        with self._exit_lock:
            reason = self._exit_reason
            if reason is None:
                self._exit_callbacks.append(callback)
                return
        callback(reason)

    def remove_exit_callback(self, callback: ExitCallback) -> None:
        with self._exit_lock, contextlib.suppress(ValueError):
            self._exit_callbacks.remove(callback)

    def _set_exit(self, reason: ExitReason) -> bool:
        """Record the exit reason and fire callbacks; False if one was already recorded."""
        with self._exit_lock:
            if self._exit_reason is not None:
                return False
            reason = self._forced or reason
            self._exit_reason = reason
            self._callback_thread = threading.get_ident()
            callbacks, self._exit_callbacks = self._exit_callbacks, []
        # Callbacks run before waiters wake: once `wait()` returns, every monitor has its
        # Down and the supervisor has been told, so a following supervisor call sees it.
        for callback in callbacks:
            try:
                callback(reason)
            except Exception:
                log.exception("exit_callback_failed", handle=self.handle_id)
        self._exited.set()
        return True

    # -- process children of its work (`owners`) ----------------------------------------

    def attach(self, child: ChildHandle) -> None:
        """List `child`, a process child started for this one's work, under it (in
        `attached()` and the snapshot) until the child ends."""
        key = child.handle_id
        with self._exit_lock:
            self._attached[key] = child

        def detach(_reason: ExitReason) -> None:
            with self._exit_lock:
                self._attached.pop(key, None)

        child.add_exit_callback(detach)  # at once if it has ended already

    def attached(self) -> list[ChildHandle]:
        """The live process children attached to this one, oldest first."""
        with self._exit_lock:
            return list(self._attached.values())

    # -- control -------------------------------------------------------------------------

    @abc.abstractmethod
    def stop(self, timeout: float | None = 5.0) -> ExitReason:
        """Ask the child to stop; after `timeout` seconds kill it (None waits forever,
        0 kills at once). Returns the exit reason."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Stop the child at once, without asking."""

    def exit_with(self, reason: ExitReason) -> None:
        """Kill the child and record `reason` as its exit reason (used by links)."""
        self._forced = reason
        self.kill()

    @abc.abstractmethod
    def stats(self) -> HandleStats:
        """A live reading for snapshots."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.handle_id} {self.state.value}>"


class CallChild(ChildHandle):
    """A process child that answers: `recv` its next value. Local process children
    (`process.ProcessHandle`) and remote ones (a cluster backend's) both are, so the one
    child-call helper (`childcall`) runs a call on either."""

    kind: HandleKind = "process"
    pid: int

    @abc.abstractmethod
    def recv(self, timeout: float | None = None) -> object:
        """The child's next value; `ChannelTimeout` after `timeout` seconds, another
        `ChannelError` when the child is gone without sending one."""


class ChildStartError(Exception):
    """A child could not be started (bad command, failing `on_start`, fork failure).

    `reason` says why, as an `ExitReason`; `child_id` names the spec when known.
    """

    def __init__(self, reason: ExitReason, child_id: str | None = None) -> None:
        where = f" {child_id!r}" if child_id else ""
        super().__init__(f"failed to start child{where}: {reason}")
        self.reason = reason
        self.child_id = child_id
