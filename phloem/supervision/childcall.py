"""One function call in a capped process child: `call_in_child`.

`call_in_child(fn, arg, name=..., limits=..., timeout=...)` starts a process child (from
the fork server, `limits` applied as rlimits before any user code), has it compute
`fn(arg)` and send the value back over its channel, returns that value, and makes sure
the child is gone (an answered child gets `ANSWERED_EXIT_GRACE_S` to exit, then is
killed). `fn` and `arg` travel pickled, like a `ProcessTarget`'s; the value comes back
as plain msgpack data (dicts, lists, str, bytes, numbers). `start_call` is the same in
two halves, for a caller with work of its own while the child computes.

Everything that can go wrong is one typed `ChildCallError` (a `PhloemError`), with the
child's `ExitReason` when there is one:

    child_start_failed  the child did not start (`reason` says why)
    child_timeout       no answer within `timeout`, start included; the child is killed
    child_exited        it ended without answering: raised, heap cap, signal, ...
    child_cancelled     `CallControl.cancel()` was called (before or during the call)
    child_server_lost   the fork server died with the child, during its start or its
                        call (not the child's doing: a caller may call again, once)

Its users (isolated function agents, planning callbacks) map these onto their own error
kinds. By default the child is started with `start_process`; `launcher=` starts it
through a cluster backend instead (`spec.Launcher`: the same call, the same failure kinds,
on a remote worker); `start=` lets a caller start it some other way, e.g. as a temporary
child of a supervisor (wrapping the target in a `RemoteTarget` when it has a launcher).
A child started here (locally or through a launcher) is attached to the calling thread's
owner (`owners`): `phloem tree` lists it under that actor while it runs, titled
`phloem: <owner's path> <name>`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from phloem.base import telemetry
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision._child import serve_call
from phloem.supervision.channel import ChannelError, ChannelTimeout
from phloem.supervision.handle import CallChild, ChildHandle, ChildStartError
from phloem.supervision.owners import attach_to_owner, child_title
from phloem.supervision.process import READY_TIMEOUT_RANGE, start_process
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import Launcher, Limits, ProcessTarget

ANSWERED_EXIT_GRACE_S = 1.0
"""How long a child that answered gets to exit before it is killed."""
EXIT_REPORT_WAIT_S = 5.0
"""How long to wait for the exit report of a child that hung up, or that was killed."""
DEFAULT_READY_TIMEOUT_S = 10.0
"""`start_process`'s ready timeout when the call has no `timeout`."""

Failure = Literal[
    ErrorKind.CHILD_START_FAILED,
    ErrorKind.CHILD_TIMEOUT,
    ErrorKind.CHILD_EXITED,
    ErrorKind.CHILD_CANCELLED,
    ErrorKind.CHILD_SERVER_LOST,
]
Starter = Callable[[ProcessTarget, float], ChildHandle]
"""Starts the child for a target within a ready timeout (seconds); returns its handle."""


class ChildCallError(PhloemError):
    """A `call_in_child` that did not return a value: `kind` says why (see the module
    docstring), `reason` is how the child ended (None if unknown or never started)."""

    def __init__(
        self, kind: Failure, message: str, reason: ExitReason | None = None, pid: int | None = None
    ) -> None:
        super().__init__(kind, message)
        self.reason = reason
        self.pid = pid


class CallControl:
    """A handle on one `call_in_child` for other threads: `cancel()` it, read its `pid`."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._cancelled = False
        self._starting = False
        self._handle: CallChild | None = None
        self.pid: int | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, wait: float = 0.0) -> None:
        """Kill the child (and its descendants) now — or, before it started, make sure it
        never runs — and wait up to `wait` seconds for it to be gone (a start under way
        is waited for too). The call then raises `child_cancelled` unless it already had
        its answer."""
        deadline = time.monotonic() + wait
        with self._cond:
            self._cancelled = True
            while self._starting and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            handle = self._handle
        if handle is not None:
            handle.kill()
            left = deadline - time.monotonic()
            if left > 0:
                handle.wait(left)

    def _begin(self) -> bool:
        """A start begins; False if the call was cancelled already."""
        with self._cond:
            self._starting = not self._cancelled
            return self._starting

    def _started(self, handle: CallChild | None) -> bool:
        """The start ended (None: it failed); False if the call was cancelled meanwhile."""
        with self._cond:
            self._starting = False
            self._handle = handle
            if handle is not None:
                self.pid = handle.pid or None
            self._cond.notify_all()
            return not self._cancelled


def call_in_child(
    fn: Callable[[Any], Any],
    arg: Any,
    *,
    name: str,
    limits: Limits | None = None,
    timeout: float | None = None,
    control: CallControl | None = None,
    start: Starter | None = None,
    launcher: Launcher | None = None,
) -> Any:
    """`fn(arg)` computed in a process child; `ChildCallError` if there is no value.

    `timeout` (seconds, None: no limit) covers the start and the answer together.
    """
    return start_call(
        fn,
        arg,
        name=name,
        limits=limits,
        timeout=timeout,
        control=control,
        start=start,
        launcher=launcher,
    ).result()


def start_call(
    fn: Callable[[Any], Any],
    arg: Any,
    *,
    name: str,
    limits: Limits | None = None,
    timeout: float | None = None,
    control: CallControl | None = None,
    start: Starter | None = None,
    launcher: Launcher | None = None,
) -> PendingCall:
    """The first half of `call_in_child`: returns once the child has started computing
    `fn(arg)`; `PendingCall.result()` is the second half. For a caller with work of its
    own meanwhile (grep searches one shard while children search the others): it needs
    no thread to wait, and no thread of its own competes with it for the GIL while the
    child starts. Raises as `call_in_child` does for a child that does not start."""
    control = control if control is not None else CallControl()
    deadline = None if timeout is None else time.monotonic() + timeout
    # in the caller's trace context: spans the child emits join the caller's trace
    target = ProcessTarget(serve_call, (telemetry.with_context(fn), arg), pass_channel=True)
    lo, hi = READY_TIMEOUT_RANGE
    ready = DEFAULT_READY_TIMEOUT_S if timeout is None else min(hi, max(lo, timeout))
    if start is not None:
        starter = start
    elif launcher is not None:
        starter = _launch(launcher, name, limits)
    else:
        starter = _start_process(name, limits)
    if not control._begin():
        raise ChildCallError(ErrorKind.CHILD_CANCELLED, f"{name}: cancelled before it started")
    try:
        started = starter(target, ready)
    except ChildStartError as exc:
        control._started(None)
        kind: Failure = ErrorKind.CHILD_START_FAILED
        if exc.reason.kind is ExitKind.TIMEOUT:
            kind = ErrorKind.CHILD_TIMEOUT
        elif exc.reason.server_lost:
            kind = ErrorKind.CHILD_SERVER_LOST
        raise ChildCallError(kind, f"{name}: {exc}", exc.reason) from None
    except BaseException:
        control._started(None)
        raise
    if not isinstance(started, CallChild):
        control._started(None)
        started.stop(0)
        raise TypeError(f"start must return a CallChild, not {type(started).__name__}")
    handle = started
    if not control._started(handle):
        stopped = handle.stop(0)
        raise ChildCallError(ErrorKind.CHILD_CANCELLED, f"{name}: cancelled", stopped, handle.pid)
    return PendingCall(handle, name, timeout, deadline, control)


class PendingCall:
    """A started `start_call`: `result()` waits for the value (once)."""

    def __init__(
        self,
        handle: CallChild,
        name: str,
        timeout: float | None,
        deadline: float | None,
        control: CallControl,
    ) -> None:
        self._handle = handle
        self._name = name
        self._timeout = timeout
        self._deadline = deadline
        self._control = control

    def result(self) -> Any:
        """The value, or `ChildCallError` (see the module docstring); the child is gone
        when it returns."""
        return _finish(self._handle, self._name, self._timeout, self._deadline, self._control)


def _finish(
    handle: CallChild,
    name: str,
    timeout: float | None,
    deadline: float | None,
    control: CallControl,
) -> Any:
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        value = handle.recv(remaining)
    except ChannelTimeout:
        handle.kill()
        reason: ExitReason | None = handle.wait(EXIT_REPORT_WAIT_S)
        raise ChildCallError(
            ErrorKind.CHILD_TIMEOUT,
            f"{name}: no answer within {timeout or 0:g}s",
            reason,
            handle.pid,
        ) from None
    except ChannelError:
        reason = handle.wait(EXIT_REPORT_WAIT_S)
        if reason is None:  # it hung up but lives on
            reason = handle.stop(0)
        if control.cancelled:
            raise ChildCallError(
                ErrorKind.CHILD_CANCELLED, f"{name}: cancelled", reason, handle.pid
            ) from None
        if reason.server_lost:
            raise ChildCallError(
                ErrorKind.CHILD_SERVER_LOST, f"{name}: {reason}", reason, handle.pid
            ) from None
        raise ChildCallError(
            ErrorKind.CHILD_EXITED, f"{name}: process child ended: {reason}", reason, handle.pid
        ) from None
    if handle.wait(ANSWERED_EXIT_GRACE_S) is None:
        handle.stop(0)
    return value


def _launch(launcher: Launcher, name: str, limits: Limits | None) -> Starter:
    def start(target: ProcessTarget, ready_timeout: float) -> ChildHandle:
        handle: ChildHandle = launcher.launch(
            target,
            name=name,
            limits=limits,
            ready_timeout=ready_timeout,
            title=child_title(name),
        )
        attach_to_owner(handle)  # as `start_process` attaches a local one
        return handle

    return start


def _start_process(name: str, limits: Limits | None) -> Starter:
    def start(target: ProcessTarget, ready_timeout: float) -> ChildHandle:
        return start_process(target, name=name, limits=limits, ready_timeout=ready_timeout)

    return start
