"""The supervised executor: every sub-agent invocation is a temporary actor.

Each run gets its own supervisor (`agent-run:<name>`, a root or a child of a given
parent supervisor) so every invocation has a place in the tree (`phloem tree`). An
invocation actor runs the agent's `run(ctx)` on its own thread and streams events into
the group's bounded queue; its exit — normal, exception or killed — is observed through
the handle's exit callback, so an agent that crashes or is killed still completes the
group with an error, never a hang. All agents of a group start before any is awaited,
so they run concurrently.

Cancellation (the run's `CancelToken`) wakes the group at once; running invocations
are asked to stop, then killed after `DEFAULT_SHUTDOWN_S`. A group whose agents are
still running after `invocation_timeout_s` has them killed and reported as
`agent_timeout`.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from phloem.agents.agent import Agent, invoke
from phloem.agents.context import CancelToken, InvocationContext
from phloem.agents.executor import (
    AgentDone,
    AgentEvent,
    GroupItem,
    Invocation,
    exit_error_kind,
)
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, ErrorValue
from phloem.protocols.limits import check_range
from phloem.supervision import (
    Actor,
    ChildHandle,
    ChildSpec,
    ExitKind,
    ExitReason,
    Supervisor,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
)
from phloem.supervision.spec import Launcher

log = get_logger("phloem.agents")

# Named limits.
GROUP_QUEUE_LIMIT = 1_024  # events waiting between a group's agents and the planner loop
DEFAULT_SHUTDOWN_S = 2.0  # grace for a cancelled invocation before it is killed
PUT_POLL_S = 0.2  # how often a producer blocked on a full queue rechecks cancellation
DEFAULT_INVOCATION_TIMEOUT_S = 600.0  # one sub-agent invocation; then it is killed
INVOCATION_TIMEOUT_RANGE = (0.01, 86_400.0)
RUN_SUPERVISOR_LIGHT = True
"""A run's supervisor is a light actor (`phloem.supervision.light`): a waiting run holds
no thread for it, and its start costs no thread start. It only starts and stops the
run's children (a pool worker's time while it waits for one)."""


class _Exit:
    __slots__ = ("agent", "reason")

    def __init__(self, agent: str, reason: ExitReason) -> None:
        self.agent = agent
        self.reason = reason


class _Wake:
    """Put on the queue when the run is cancelled, to wake the consumer."""


class _Sink:
    """The bounded queue of one group; producers give up once the group is closed."""

    def __init__(self, cancel: CancelToken, limit: int = GROUP_QUEUE_LIMIT) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=limit)
        self.cancel = cancel
        self.closed = threading.Event()

    def put(self, item: Any) -> bool:
        while not self.closed.is_set():
            try:
                self.queue.put(item, timeout=PUT_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def wake(self) -> None:
        try:
            self.queue.put_nowait(_Wake())
        except queue.Full:
            pass  # the consumer is busy draining and checks the token after each item


class AgentInvocation(Actor):
    """Runs one agent invocation, then exits normally (or with the agent's exception)."""

    max_inbox = 4

    def __init__(
        self, agent: Agent, ctx: InvocationContext, sink: _Sink, trace: Any = None
    ) -> None:
        super().__init__()
        self.agent = agent
        self.ctx = ctx
        self.sink = sink
        self.trace = trace  # the invoking agent's context: this invocation's span is a child

    def on_receive(self, message: Any) -> Any:
        if message != "run":
            return None
        with telemetry.use(self.trace):
            for event in invoke(self.agent, self.ctx):
                if not self.sink.put(AgentEvent(self.agent.name, event)) or self.ctx.cancelled:
                    break
        self.exit(ExitReason.normal())
        return None


class SupervisedExecutor:
    """Runs groups as temporary actors under one supervisor per run; `close()` stops it."""

    def __init__(
        self,
        name: str = "agents",
        parent: SupervisorRef | None = None,
        *,
        invocation_timeout_s: float = DEFAULT_INVOCATION_TIMEOUT_S,
        launcher: Launcher | None = None,
    ) -> None:
        # Where isolated function agents' process children run (None: this machine;
        # a cluster backend's launcher: `phloem.cluster`).
        self.launcher = launcher
        self.invocation_timeout_s = float(
            check_range(
                "invocation_timeout_s",
                invocation_timeout_s,
                *INVOCATION_TIMEOUT_RANGE,
                integer=False,
            )
        )
        self.name = name
        self.parent = parent
        self._lock = threading.Lock()
        self._sup: SupervisorRef | None = None
        self._ids = itertools.count(1)
        self._closed = False

    @property
    def supervisor(self) -> SupervisorRef:
        with self._lock:
            if self._closed:
                raise RuntimeError("executor is closed")
            if self._sup is None:
                spec = SupervisorSpec(strategy="one_for_one", intensity=0)
                sup_id = f"agent-run:{self.name}"
                if self.parent is not None:
                    handle = self.parent.start_child(
                        ChildSpec(
                            sup_id,
                            SupervisorChild(spec, light=RUN_SUPERVISOR_LIGHT),
                            restart="temporary",
                        )
                    )
                    assert isinstance(handle, SupervisorRef)
                    self._sup = handle
                else:
                    self._sup = Supervisor.start(spec, [], name=sup_id, light=RUN_SUPERVISOR_LIGHT)
            return self._sup

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sup, self._sup = self._sup, None
        if sup is not None and sup.is_alive():
            sup.stop(timeout=DEFAULT_SHUTDOWN_S * 2)

    def __enter__(self) -> SupervisedExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_group(
        self, invocations: Sequence[Invocation], cancel: CancelToken
    ) -> Iterator[GroupItem]:
        sink = _Sink(cancel)
        wake = sink.wake
        cancel.on_cancel(wake)
        handles: dict[str, ChildHandle] = {}
        pending: set[str] = set()
        try:
            for agent, ctx in invocations:
                start = self._start(agent, ctx, sink)
                if isinstance(start, ErrorValue):
                    yield AgentDone(agent.name, start)
                    continue
                handles[agent.name] = start
                pending.add(agent.name)
            for name, handle in handles.items():
                try:
                    handle.tell("run")  # type: ignore[attr-defined]
                except Exception as exc:
                    handle.kill()
                    log.warning("agent_invocation_tell_failed", agent=name, error=str(exc))
            deadline = time.monotonic() + self.invocation_timeout_s
            while pending:
                if cancel.cancelled:
                    self._stop_all(handles)
                    return
                try:
                    item = sink.queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    for name in sorted(pending):
                        handles[name].kill()
                        yield AgentDone(
                            name,
                            ErrorValue(
                                kind=ErrorKind.AGENT_TIMEOUT,
                                message=f"{name}: still running after invocation_timeout_s"
                                f" ({self.invocation_timeout_s}s); killed",
                            ),
                        )
                    pending.clear()
                    return
                if isinstance(item, AgentEvent):
                    yield item
                elif isinstance(item, _Exit) and item.agent in pending:
                    pending.discard(item.agent)
                    yield AgentDone(item.agent, _error_of(item.reason))
        finally:
            sink.closed.set()
            cancel.remove(wake)
            if pending:
                self._stop_all({n: h for n, h in handles.items() if n in pending})

    def _start(self, agent: Agent, ctx: InvocationContext, sink: _Sink) -> ChildHandle | ErrorValue:
        child_id = f"{agent.name}#{next(self._ids)}"
        try:
            handle = self.supervisor.start_child(
                ChildSpec(
                    child_id,
                    (AgentInvocation, (agent, ctx, sink, telemetry.capture()), {}),
                    restart="temporary",
                    shutdown=DEFAULT_SHUTDOWN_S,
                )
            )
        except Exception as exc:
            return ErrorValue(kind=ErrorKind.AGENT_START_FAILED, message=f"{agent.name}: {exc}")
        name = agent.name

        def on_exit(reason: ExitReason) -> None:
            sink.put(_Exit(name, reason))

        handle.add_exit_callback(on_exit)
        return handle

    @staticmethod
    def _stop_all(handles: dict[str, ChildHandle]) -> None:
        for handle in handles.values():
            if handle.is_alive():
                handle.stop(timeout=DEFAULT_SHUTDOWN_S)


def _error_of(reason: ExitReason) -> ErrorValue | None:
    if reason.is_normal:
        return None
    if reason.kind is ExitKind.EXCEPTION:
        kind = ErrorKind.AGENT_CRASHED
    else:
        kind = exit_error_kind(reason.kind)
    return ErrorValue(kind=kind, message=str(reason))
