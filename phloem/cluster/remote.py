"""`RemoteCall`: one process target run on a pooled Ray worker, as a phloem child.

A `RemoteCall` is a `CallChild` like a local `ProcessHandle`: its supervisor (or
`call_in_child`) holds it, `phloem tree` shows it with its worker's pid and node, and it
ends with one `ExitReason` of the same kinds as a local child's:

    normal          the call answered (or a plain target returned)
    exception       the callable raised (type and redacted message), or was refused
    heap_exceeded   over the call's memory cap (RLIMIT_AS or the RSS watchdog of its
                    child on the node), or Ray's memory monitor killed the worker
    killed          phloem killed it (deadline, cancel, owner gone), or the worker or
                    its node died (`detail` says which)
    shutdown        stopped by its supervisor

On the node the work runs in a process child of the worker's own fork server, exactly as
a local child (see `worker`): the reasons its child ends with come back as they are.

There is no thread per call: the answer arrives through the Ray object's future. Killing
a call has its worker kill the call's process tree on the node (`worker.cancel`); the
call answers once the tree is swept, and its worker serves the next call (no new worker
to start). A worker that does not answer within `CANCEL_WAIT_S` is killed (`ray.kill`).
Either way the work is gone when a kill returns, as a local child's is: remote work
never outlives its deadline or owner.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import pickle
import threading
import time
import types
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.cluster.worker import CONTROL_GROUP
from phloem.supervision._child import serve_call
from phloem.supervision.channel import ChannelClosed, ChannelTimeout
from phloem.supervision.childwire import MAX_PAYLOAD_BYTES
from phloem.supervision.handle import CallChild, ChildStartError, ChildState, HandleStats
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import ProcessTarget

if TYPE_CHECKING:
    from phloem.cluster.pool import Worker, WorkerPool

CANCEL_WAIT_S = 5.0
"""How long a kill waits for the worker to sweep the call's processes on its node (and
answer); past it the worker itself is killed."""
STOP_WAIT_S = 5.0
"""How long `stop` waits for a killed call's exit to be recorded."""
KILL_WAIT_S = 10.0
"""How long a kill waits for Ray to report the worker dead (its call's object fails)."""
USAGE_INTERVAL_S = 1.0
"""Least time between two questions to a worker about a call's pid and memory."""

_tokens = itertools.count(1)


def unshippable(name: str, why: str) -> ChildStartError:
    return ChildStartError(
        ExitReason(ExitKind.EXCEPTION, error_type="Unshippable", message=why), name
    )


def encode_job(target: ProcessTarget, name: str) -> bytes:
    """The pickle a worker runs (`worker.RemoteWorker.call`): code by reference only.

    The standard pickler names functions and classes by module and qualified name and
    refuses lambdas and closures, so a target ships only code a worker can import."""
    if target.fn is serve_call and target.pass_channel:
        fn, arg = target.args
        job: tuple[Any, ...] = ("call", fn, arg)
    elif target.pass_channel:
        raise unshippable(name, "a remote child has no channel to its parent")
    else:
        job = ("run", target.fn, tuple(target.args), dict(target.kwargs or {}))
    out = io.BytesIO()
    try:
        _ByName(out, protocol=pickle.HIGHEST_PROTOCOL).dump(job)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise unshippable(
            name, f"only code importable by name runs on a cluster worker: {exc}"
        ) from None
    blob = out.getvalue()
    if len(blob) > MAX_PAYLOAD_BYTES:
        raise unshippable(name, f"a call of {len(blob)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    return blob


class _ByName(pickle.Pickler):
    """The standard pickler (code by reference), refusing code of `__main__`: a worker's
    `__main__` is not the daemon's."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType | type) and obj.__module__ == "__main__":
            raise pickle.PicklingError(f"{obj.__qualname__} is defined in __main__")
        return NotImplemented


class RemoteCall(CallChild):
    """One call on a leased worker (see the module docstring).

    In the tree it shows its node and, once its worker has said (`worker.usage`, asked
    when a snapshot reads it, at most every `USAGE_INTERVAL_S`, never waited for), the
    pid and resident memory of the process running it there; until then its worker's
    pid. `rss_cap` is the call's cap on that process's tree."""

    def __init__(
        self, name: str, worker: Worker, pool: WorkerPool, rss_cap: int | None = None
    ) -> None:
        super().__init__(name)
        self.worker = worker
        self.pool = pool
        self.pid = worker.pid
        self.node = worker.node
        self.rss_cap = rss_cap
        self._usage: tuple[int, int | None] | None = None  # the worker's last reading
        self._usage_asked = -math.inf  # when it was last asked (monotonic)
        self.token = next(_tokens)  # names this call to its worker's `cancel`
        self._lock = threading.Lock()
        self._answered = threading.Event()
        self._has_value = False
        self._value: Any = None
        self._future: Any = None
        self._settled = False  # the answer (or the failure) arrived first
        self._killing = False  # a kill came first: it records the ending

    def _begin(self, ref: Any) -> None:
        """The call was submitted as `ref`: watch for its answer."""
        self._state = ChildState.RUNNING
        self._future = ref.future()
        self._future.add_done_callback(self._on_done)

    # -- the answer ----------------------------------------------------------------------

    def _on_done(self, future: Any) -> None:
        """Runs on Ray's thread: record the answer or the failure, release the worker
        (unless a kill came first: then the kill records the ending)."""
        with self._lock:
            if self._killing:
                return
            self._settled = True
        try:
            answer = future.result()
        except BaseException as exc:
            self.pool.discard(self.worker)
            self._end(self.pool.failure_reason(exc, self.worker))
            return
        match answer:
            case ("ok", value):
                with self._lock:
                    self._value, self._has_value = value, True
                self.pool.release(self.worker)
                self._end(ExitReason.normal())
            case ("exit", dict(data)):
                try:
                    reason = msgspec.convert(data, ExitReason)
                except msgspec.ValidationError:
                    reason = ExitReason.killed("the worker sent a malformed exit reason")
                self.pool.release(self.worker)
                self._end(reason)
            case _:
                self.pool.discard(self.worker)
                self._end(ExitReason.killed("the worker sent a malformed answer"))

    def _end(self, reason: ExitReason) -> None:
        self.pool.forget(self)
        self._set_exit(reason)
        self._answered.set()

    # -- CallChild -----------------------------------------------------------------------

    def recv(self, timeout: float | None = None) -> Any:
        if not self._answered.wait(timeout):
            raise ChannelTimeout(f"{self.name}: no answer within {timeout}s")
        with self._lock:
            if self._has_value:
                self._has_value = False
                return self._value
        raise ChannelClosed(f"{self.name}: the remote call ended: {self.exit_reason}")

    def kill(self) -> None:
        self._kill(ExitReason.killed("killed by phloem"))

    def stop(self, timeout: float | None = 5.0) -> ExitReason:
        """A remote call cannot finish early: stopping it ends it at once (reason
        `shutdown`, see `_kill`), unless it has already ended."""
        if self.exit_reason is None:
            self._state = ChildState.STOPPING
            self._kill(ExitReason.shutdown())
        return self.wait(STOP_WAIT_S) or ExitReason.shutdown()

    def _kill(self, reason: ExitReason) -> None:
        """End the call (see the module docstring): when this returns its processes are
        gone, and its worker is either back in the pool or killed."""
        with self._lock:
            if self._settled or self._killing:
                return
            self._killing = True
        future = self._future
        swept = False
        if future is not None:  # submitted: it may be running on the node
            self.pool.cancel(self.worker, self.token, CANCEL_WAIT_S)
            with contextlib.suppress(BaseException):  # no answer, or the worker died
                answer = future.result(CANCEL_WAIT_S + 1.0)
                swept = isinstance(answer, tuple) and answer[:1] in (("ok",), ("exit",))
        if swept:
            self.pool.release(self.worker)
        else:
            self.pool.discard(self.worker, now=True)
        self._end(self._forced or reason)
        if future is not None and not swept:
            with contextlib.suppress(BaseException):
                future.exception(KILL_WAIT_S)

    def stats(self) -> HandleStats:
        self._ask_usage()
        pid, rss = self._usage or (self.pid, None)
        return HandleStats(pid=pid, rss_bytes=rss, rss_cap_bytes=self.rss_cap, node=self.node)

    def _ask_usage(self) -> None:
        """Ask the worker for the call's pid and memory, if it is time (see the class
        docstring); the answer lands in `_usage` when it comes."""
        now = time.monotonic()
        with self._lock:
            if self._settled or self._killing or now - self._usage_asked < USAGE_INTERVAL_S:
                return
            self._usage_asked = now
        try:
            ref = self.worker.actor.usage.options(concurrency_group=CONTROL_GROUP).remote(
                self.token
            )
        except Exception:  # a worker already gone: its call ends through its object
            return
        ref.future().add_done_callback(self._on_usage)

    def _on_usage(self, future: Any) -> None:
        with contextlib.suppress(BaseException):  # no reading: keep the last one
            reading = future.result()
            if isinstance(reading, tuple | list) and len(reading) == 2:
                pid, rss = reading
                if isinstance(pid, int) and (rss is None or isinstance(rss, int)):
                    self._usage = (pid, rss)

    def __repr__(self) -> str:
        return f"<RemoteCall {self.name!r} pid {self.pid} on {self.node} {self.state.value}>"
