"""`WorkerPool`: the Ray workers of one kind, leased one call at a time.

Workers are Ray actors of `worker.RemoteWorker`, started on demand up to the kind's
`max_workers`, with its `num_cpus`/`memory` for Ray's scheduler, spread over the nodes,
and `max_restarts=0`: a worker that dies is gone, and phloem starts another. Once a kind
is used, `warm_workers` idle ones are kept started ahead of need (as the fork server
keeps children prepared), so a call — or the one after a worker was lost — rarely
waits for a worker process to start (with `[cluster] warm_at_start`, from the
backend's start: then not even the first call waits). A call leases an idle worker (or
starts one, or waits for one until its start deadline), and returns it when it answers
— a call phloem ends early included, once the worker has swept its processes; a worker
that does not answer a cancel in time, dies, or is killed by Ray's memory monitor is
discarded (killed), never reused. Like Ray's own task workers, a worker is reused
between calls: adapters are instantiated afresh per call, but module-level state of the
configured code may persist in a worker.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from phloem.base.logs import get_logger
from phloem.base.settings import configured_modules
from phloem.cluster import rayapi
from phloem.cluster.settings import Kind, KindResources
from phloem.cluster.worker import CONTROL_GROUP
from phloem.supervision.handle import ChildStartError
from phloem.supervision.reasons import ExitKind, ExitReason

if TYPE_CHECKING:
    from phloem.cluster.remote import RemoteCall

log = get_logger("phloem.cluster")

ENTRY_MODULES: dict[Kind, str] = {
    "planning_callbacks": "phloem.actors.planning.worker",
    "isolated_agents": "phloem.agents.isolated",
    "tools": "phloem.actors.live.tools",
    "eval_cases": "phloem.agents.isolated",
}
"""The phloem module whose function each kind's calls run (preloaded on the workers)."""


@dataclass(eq=False)
class Worker:
    """One live worker: its Ray actor, pid and node (`ip/node-id`)."""

    actor: Any
    pid: int
    node_id: str
    node: str


class WorkerPool:
    """See the module docstring. Thread-safe."""

    def __init__(
        self,
        kind: Kind,
        resources: KindResources,
        actor_class: Any,
        runtime_env: dict[str, Any] | None,
        helper_thread: ThreadPoolExecutor,
    ) -> None:
        self.kind = kind
        self.resources = resources
        self._actor_class = actor_class
        self._runtime_env = runtime_env
        self._helper_thread = helper_thread
        self._cond = threading.Condition(threading.Lock())
        self._idle: deque[Worker] = deque()
        self._leased: set[Worker] = set()
        self._pending: dict[Any, None] = {}  # actors started, not ready yet
        self._waiting = 0  # calls waiting for a worker
        self._start_failures = 0
        self._why = ""
        self._calls: set[RemoteCall] = set()
        self._closed = False
        self.started = 0  # workers started over the pool's life
        self.lost = 0  # workers discarded (killed, died, over their cap)

    # -- leasing -------------------------------------------------------------------------

    def lease(self, name: str, timeout: float) -> Worker:
        """An idle worker, or the first one that becomes idle within `timeout`: released
        by another call, or started now (up to `max_workers`). A start Ray cannot place
        yet (no free resources) stays pending without holding this call: whichever is
        first, a released worker or the new one, serves it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            failures = self._start_failures
        while True:
            with self._cond:
                if self._closed:
                    raise _start_error(name, "the cluster backend has stopped")
                if self._idle:
                    worker = self._idle.popleft()
                    self._leased.add(worker)
                    spares = self._spares_needed()
                    break
                if self._start_failures != failures:
                    raise _start_error(name, f"a {self.kind} worker did not start: {self._why}")
                busy = len(self._leased) + len(self._pending)
                spawn = busy < self.resources.max_workers and len(self._pending) <= self._waiting
                if not spawn:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChildStartError(ExitReason.timeout(self._busy(timeout)), name)
                    self._waiting += 1
                    try:
                        self._cond.wait(left)
                    finally:
                        self._waiting -= 1
                    continue
                placeholder = object()
                self._pending[placeholder] = None
            try:
                actor = self._spawn()
            except Exception as exc:
                with self._cond:
                    del self._pending[placeholder]
                    self._cond.notify_all()
                raise _start_error(name, f"a {self.kind} worker did not start: {exc}") from None
            with self._cond:
                del self._pending[placeholder]
                self._pending[actor] = None
            self._watch_ready(actor)
        if spares:
            self._helper(self._warm, spares)
        return worker

    def warm_now(self) -> None:
        """Start the kind's `warm_workers` now, before its first call (`[cluster]
        warm_at_start`); in the background, on the helper thread."""
        with self._cond:
            spares = 0 if self._closed else self._spares_needed()
        if spares:
            self._helper(self._warm, spares)

    def _spares_needed(self) -> int:
        """How many workers to start so `warm_workers` are idle or starting (lock held)."""
        ready = len(self._idle) + len(self._pending)
        room = self.resources.max_workers - len(self._leased) - ready
        return max(0, min(self.resources.warm_workers - ready, room))

    def _warm(self, count: int) -> None:
        """Start `count` spare workers (on the helper thread)."""
        for _ in range(count):
            try:
                actor = self._spawn()
            except Exception as exc:  # a spare is an optimisation: say why, go on
                log.warning("cluster_warm_worker_failed", kind=self.kind, error=str(exc))
                return
            with self._cond:
                if self._closed:
                    closed = True
                else:
                    closed = False
                    self._pending[actor] = None
            if closed:
                self._kill(Worker(actor, 0, "", ""))
                return
            self._watch_ready(actor)

    def _watch_ready(self, actor: Any) -> None:
        actor.ready.remote().future().add_done_callback(
            lambda future, actor=actor: self._on_ready(actor, future)
        )

    def _busy(self, timeout: float) -> str:
        if self._pending:
            return (
                f"no {self.kind} worker was ready within {timeout:g}s ({len(self._pending)} "
                f"starting: does the cluster have num_cpus={self.resources.num_cpus:g} free?)"
            )
        return f"all {self.resources.max_workers} {self.kind} workers stayed busy"

    def _spawn(self) -> Any:
        options: dict[str, Any] = {
            "num_cpus": self.resources.num_cpus,
            "max_restarts": 0,
            "max_task_retries": 0,
            "max_concurrency": 1,
            "scheduling_strategy": "SPREAD",
        }
        if self.resources.memory:
            options["memory"] = self.resources.memory
        if self.resources.custom_resources:
            options["resources"] = dict(self.resources.custom_resources)
        if self._runtime_env:
            options["runtime_env"] = self._runtime_env
        return self._actor_class.options(**options).remote(self._preload())

    def _preload(self) -> list[str]:
        """What a new worker's fork server imports: the kind's phloem entry module and
        the modules of configured components (trusted code, loaded by the daemon too)."""
        return sorted({ENTRY_MODULES[self.kind], *configured_modules()})

    def _on_ready(self, actor: Any, future: Any) -> None:
        """A started worker answered `ready` (or failed to start): it joins the idle."""
        try:
            pid, node_id, ip = future.result()
        except BaseException as exc:
            with self._cond:
                self._pending.pop(actor, None)
                self._start_failures += 1
                self._why = f"{type(exc).__name__}: {exc}"[:500]
                self._cond.notify_all()
            self._kill(Worker(actor, 0, "", ""))
            return
        worker = Worker(actor, int(pid), str(node_id), f"{ip}/{str(node_id)[:8]}")
        with self._cond:
            self._pending.pop(actor, None)
            if not self._closed:
                self._idle.append(worker)
                self.started += 1
                self._cond.notify_all()
                return
        self._kill(worker)

    def release(self, worker: Worker) -> None:
        """A call on `worker` answered: it is idle again."""
        with self._cond:
            if worker not in self._leased:
                return
            self._leased.discard(worker)
            if self._closed:
                self._kill(worker)
                return
            self._idle.append(worker)
            self._cond.notify()

    def discard(self, worker: Worker, *, now: bool = False) -> None:
        """`worker` must not be used again: kill it (if it still runs) and free its slot;
        `now` kills it from this thread (else the backend's helper thread does)."""
        with self._cond:
            known = worker in self._leased
            self._leased.discard(worker)
            if known:
                self.lost += 1
                self._cond.notify()
            spares = self._spares_needed() if known and not self._closed else 0
        if known:
            self._kill(worker, now=now)
            if spares:  # a replacement, ready before the next call needs it
                self._helper(self._warm, spares)

    def cancel(self, worker: Worker, token: int, wait_s: float) -> None:
        """Ask `worker` to end call `token` (it sweeps the call's processes within
        `wait_s` seconds, then the call answers). Never from one of Ray's callback
        threads (see `_helper`)."""
        try:
            worker.actor.cancel.options(concurrency_group=CONTROL_GROUP).remote(token, wait_s)
        except Exception as exc:  # a worker already gone: its call's object fails
            log.debug("cluster_cancel_failed", error=f"{type(exc).__name__}: {exc}"[:300])

    def _kill(self, worker: Worker, *, now: bool = False) -> None:
        ray = rayapi.ray()

        def kill() -> None:
            try:
                ray.kill(worker.actor, no_restart=True)
            except Exception as exc:  # a worker already gone, a lost connection
                log.debug("cluster_worker_kill_failed", error=str(exc))

        if now:
            kill()
            return
        self._helper(kill)

    def _helper(self, job: Any, *args: Any) -> None:
        """Run `job(*args)` on the backend's helper thread. Ray's own threads (which run
        the callbacks of its futures) must never call into Ray: that can deadlock with
        `ray.shutdown`. After the backend stopped, nothing more is run: it has killed
        every worker it knew."""
        try:
            self._helper_thread.submit(job, *args)
        except RuntimeError:
            log.debug("cluster_helper_stopped", job=getattr(job, "__name__", "job"))

    # -- calls in flight -----------------------------------------------------------------

    def track(self, call: RemoteCall) -> None:
        with self._cond:
            self._calls.add(call)

    def forget(self, call: RemoteCall) -> None:
        with self._cond:
            self._calls.discard(call)

    def in_flight(self) -> int:
        with self._cond:
            return len(self._calls)

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {
                "idle": len(self._idle),
                "busy": len(self._leased),
                "starting": len(self._pending),
                "in_flight": len(self._calls),
                "started": self.started,
                "lost": self.lost,
            }

    def failure_reason(self, exc: BaseException, worker: Worker) -> ExitReason:
        """The exit reason of a call whose Ray object failed with `exc`."""
        ray = rayapi.ray()
        if isinstance(exc, ray.exceptions.OutOfMemoryError):
            return ExitReason.heap_exceeded("Ray's memory monitor killed the worker")
        if isinstance(exc, ray.exceptions.RayActorError):
            text = str(exc).lower()
            if "node has died" in text or "node was terminated" in text or "node died" in text:
                return ExitReason.killed(f"the worker's node {worker.node} was lost")
            return ExitReason.killed(f"the worker (pid {worker.pid} on {worker.node}) died")
        if isinstance(exc, ray.exceptions.TaskCancelledError):
            return ExitReason.killed("cancelled")
        return ExitReason(ExitKind.KILLED, detail=f"ray: {type(exc).__name__}")

    # -- stopping ------------------------------------------------------------------------

    def close(self) -> list[RemoteCall]:
        """Stop leasing; kill every worker without a call in flight. Returns the calls in
        flight: killing each (`RemoteCall.kill`) sweeps its processes, then its worker."""
        with self._cond:
            self._closed = True
            calls = list(self._calls)
            busy = {call.worker for call in calls}
            workers = [*self._idle, *(w for w in self._leased if w not in busy)]
            workers.extend(Worker(a, 0, "", "") for a in self._pending if not _placeholder(a))
            self._idle.clear()
            self._leased &= busy
            self._cond.notify_all()
        for worker in workers:
            self._kill(worker)
        return calls


def _placeholder(actor: Any) -> bool:
    return type(actor) is object


def _start_error(name: str, why: str) -> ChildStartError:
    return ChildStartError(
        ExitReason(ExitKind.EXCEPTION, error_type="ClusterError", message=why), name
    )
