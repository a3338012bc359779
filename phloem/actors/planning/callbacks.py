"""Running one planner/executor callback in its own capped, monitored process child.

`CallbackRunner.start` returns at once with a `CallbackTask`; a small waiter thread starts
the child (from the fork server, with the run's memory cap as `RLIMIT_AS`), waits for its
single answer (start and answer together within the callback's timeout), makes sure the
child and all its descendants are gone, and then calls `on_done(CallbackOutcome)` exactly
once — unless the task was cancelled first: then the child is killed, nothing reported.

A `CallbackOutcome` is either the child's wire outcome (see `worker`) or a failure:
`callback_timeout`, `callback_worker_down`, `callback_memory_exceeded` (the child hit its
memory cap) or `callback_exception`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import structlog

from phloem.actors.planning import worker
from phloem.protocols.errors import PhloemError
from phloem.supervision.handle import ChildStartError
from phloem.supervision.reasons import ExitKind
from phloem.supervision.spec import Limits, ProcessTarget

log = structlog.get_logger("phloem.planning")

Failure = Literal[
    "callback_timeout", "callback_worker_down", "callback_memory_exceeded", "callback_exception"
]
# How long a child that already answered gets to exit before it is killed.
CHILD_EXIT_GRACE_S = 1.0
# A callback's timeout covers its child's start too; start_process accepts this range.
MIN_READY_TIMEOUT_S = 0.001
MAX_READY_TIMEOUT_S = 3600.0


@dataclass(frozen=True, slots=True)
class CallbackOutcome:
    """The child's checked wire outcome, or why there is none."""

    wire: dict[str, Any] | None = None
    failure: Failure | None = None
    detail: str | None = None
    pid: int | None = None


class CallbackTask:
    """One callback in flight. `cancel()` kills its child; `on_done` is then never called."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._handle: Any = None
        self.pid: int | None = None
        self.done = threading.Event()

    def cancel(self) -> None:
        """Kill the child (and its descendants) now; wait until it is reaped."""
        with self._lock:
            self._cancelled = True
            handle = self._handle
        if handle is not None:
            handle.kill()
            handle.wait(5.0)

    @property
    def cancelled(self) -> bool:
        return self._cancelled


def _reap(handle: Any) -> Any:
    """Wait briefly for a child that answered (or hung up) to exit; then kill it."""
    reason = handle.wait(CHILD_EXIT_GRACE_S)
    if reason is None:
        reason = handle.stop(0)
    return reason


class CallbackRunner:
    """Starts callback children through `phloem.supervision.process.start_process`."""

    def start(
        self,
        request: bytes,
        timeout_s: float,
        max_memory_bytes: int,
        on_done: Callable[[CallbackOutcome], None],
        name: str = "planning-callback",
    ) -> CallbackTask:
        task = CallbackTask()
        thread = threading.Thread(
            target=self._run,
            args=(task, request, timeout_s, max_memory_bytes, on_done, name),
            name=name,
            daemon=True,
        )
        thread.start()
        return task

    def _run(
        self,
        task: CallbackTask,
        request: bytes,
        timeout_s: float,
        max_memory_bytes: int,
        on_done: Callable[[CallbackOutcome], None],
        name: str,
    ) -> None:
        try:
            outcome = self._call(task, request, timeout_s, max_memory_bytes, name)
        except Exception as exc:  # a bug here must still end the callback loudly
            log.exception("planning_callback_runner_failed")
            outcome = CallbackOutcome(failure="callback_worker_down", detail=type(exc).__name__)
        task.done.set()
        if not task.cancelled:
            on_done(outcome)

    def _call(
        self,
        task: CallbackTask,
        request: bytes,
        timeout_s: float,
        max_memory_bytes: int,
        name: str,
    ) -> CallbackOutcome:
        from phloem.supervision.process import start_process

        deadline = time.monotonic() + timeout_s
        with task._lock:
            if task.cancelled:
                return CallbackOutcome(failure="callback_worker_down", detail="cancelled")
            try:
                handle = start_process(
                    ProcessTarget(worker.callback_main, (request,), pass_channel=True),
                    name=name,
                    limits=Limits(max_memory_bytes=max_memory_bytes),
                    ready_timeout=min(MAX_READY_TIMEOUT_S, max(MIN_READY_TIMEOUT_S, timeout_s)),
                )
            except ChildStartError as exc:
                if exc.reason.kind is ExitKind.TIMEOUT:
                    return CallbackOutcome(failure="callback_timeout", detail="start")
                return CallbackOutcome(failure="callback_worker_down", detail=str(exc))
            except Exception as exc:
                return CallbackOutcome(failure="callback_worker_down", detail=str(exc))
            task._handle = handle
            task.pid = handle.pid
        try:
            data = handle.recv(max(0.0, deadline - time.monotonic()))
        except PhloemError as exc:
            if exc.kind == "channel_timeout":
                handle.kill()
                handle.wait(5.0)
                return CallbackOutcome(failure="callback_timeout", pid=task.pid)
            reason = _reap(handle)
            if reason is not None and reason.kind is ExitKind.HEAP_EXCEEDED:
                return CallbackOutcome(failure="callback_memory_exceeded", pid=task.pid)
            return CallbackOutcome(
                failure="callback_worker_down",
                detail=str(reason) if reason is not None else exc.kind,
                pid=task.pid,
            )
        _reap(handle)
        try:
            wire = msgspec.json.decode(data)
        except (msgspec.DecodeError, TypeError):
            return CallbackOutcome(failure="callback_worker_down", detail="bad answer")
        if not isinstance(wire, dict) or not isinstance(wire.get("tag"), str):
            return CallbackOutcome(failure="callback_worker_down", detail="bad answer")
        if wire["tag"] == "memory_exceeded":
            return CallbackOutcome(failure="callback_memory_exceeded", pid=task.pid)
        if wire["tag"] == "exception":
            return CallbackOutcome(
                failure="callback_exception",
                detail=f"{wire.get('type')}: {wire.get('message')}",
                pid=task.pid,
            )
        return CallbackOutcome(wire=wire, pid=task.pid)
