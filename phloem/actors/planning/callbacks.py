"""Running one planner/executor callback in its own capped, monitored process child.

`CallbackRunner.start` returns at once with a `CallbackTask`; a small waiter thread calls
`worker.invoke` in a process child with `phloem.supervision.childcall.call_in_child`
(from the fork server, with the run's memory cap as `RLIMIT_AS`; start and answer
together within the callback's timeout; the child and all its descendants gone before it
returns), and then calls `on_done(CallbackOutcome)` exactly once — unless the task was
cancelled first: then the child is killed, nothing reported.

A `CallbackOutcome` is either the child's checked answer (an `outcomes.Outcome`) or a
failure: `callback_timeout`, `callback_worker_down`, `callback_memory_exceeded` (the
child hit its memory cap), `callback_exception`, or `callback_server_lost` (the fork
server died with the child: the run asks a planner callback again once, see `run`).

An executor that runs an agent (`[planning.agents]`) has no child of its own:
`start_agent` asks the tree's delegation (`phloem.agents.delegation`, the same one an
agent tool uses) to run the agent as a run of its own, with the step's action
`{"input", "state"}` (no `input`: the step's description), within the callback's
timeout; the agent tool's answer is the step's `ok` output, its failure value the
step's `error` reason (`timeout` is `callback_timeout`; a cancelled task reports nothing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from phloem.actors.planning import outcomes, worker
from phloem.agents.delegation import AgentTool, Delegate
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.protocols.plan import Step
from phloem.supervision.childcall import CallControl, ChildCallError, call_in_child
from phloem.supervision.owners import carry
from phloem.supervision.reasons import ExitKind
from phloem.supervision.spec import Launcher, Limits
from phloem.tools.contract import ToolContext, is_failure

log = get_logger("phloem.planning")

Failure = Literal[
    "callback_timeout",
    "callback_worker_down",
    "callback_memory_exceeded",
    "callback_exception",
    "callback_server_lost",
]
CANCEL_WAIT_S = 5.0
"""How long `CallbackTask.cancel` waits for the killed child to be reaped."""


@dataclass(frozen=True, slots=True)
class CallbackOutcome:
    """The child's checked answer, or why there is none."""

    answer: outcomes.Outcome | None = None
    failure: Failure | None = None
    detail: str | None = None
    pid: int | None = None


class CallbackTask:
    """One callback in flight. `cancel()` kills its child; `on_done` is then never called."""

    def __init__(self) -> None:
        self.control = CallControl()
        self.done = threading.Event()
        self.stop = threading.Event()  # an agent step's cancel (it has no child)

    @property
    def pid(self) -> int | None:
        return self.control.pid

    def cancel(self) -> None:
        """Kill the child (and its descendants) now; wait until it is reaped."""
        self.stop.set()
        self.control.cancel(wait=CANCEL_WAIT_S)

    @property
    def cancelled(self) -> bool:
        return self.control.cancelled


class CallbackRunner:
    """Runs each callback in a child of its own through `call_in_child`: a local process
    child, or — with a `launcher` (`[cluster]` kind `planning_callbacks`) — a call on a
    cluster worker, with the same outcomes."""

    def __init__(
        self,
        launcher: Launcher | None = None,
        delegate: Callable[[], Delegate | None] = lambda: None,
    ) -> None:
        self.launcher = launcher
        self.delegate = delegate

    def start_agent(
        self,
        agent: str,
        step: Step,
        timeout_s: float,
        on_done: Callable[[CallbackOutcome], None],
        name: str = "planning-agent-step",
    ) -> CallbackTask:
        """Run `step` through the catalogue agent `agent` (see the module docstring)."""
        task = CallbackTask()
        tool = AgentTool(agent, self.delegate, timeout_s=timeout_s)
        action = step.action
        text = action.get("input")
        state = action.get("state")
        args: dict[str, Any] = {
            "input": text if isinstance(text, str) else step.description,
            "state": state if isinstance(state, dict) else {},
        }

        def work() -> None:
            answer = tool.run(args, ToolContext(session=name, cancel=task.stop))
            task.done.set()
            if task.cancelled or task.stop.is_set():
                return
            if not is_failure(answer):
                on_done(CallbackOutcome(answer=outcomes.OkOutcome(answer)))
            elif answer.get("error") == "timeout":
                on_done(CallbackOutcome(failure="callback_timeout", detail=answer.get("message")))
            else:
                on_done(CallbackOutcome(answer=outcomes.ErrorOutcome(answer)))

        threading.Thread(target=work, name=name, daemon=True).start()
        return task

    def start(
        self,
        request: bytes,
        timeout_s: float,
        max_memory_bytes: int,
        on_done: Callable[[CallbackOutcome], None],
        name: str = "planning-callback",
        trace: Any = None,
    ) -> CallbackTask:
        """`trace`: the callback's span; the child runs in its context."""
        task = CallbackTask()
        thread = threading.Thread(
            target=carry(self._run),  # its child is listed under the run in the tree
            args=(task, request, timeout_s, max_memory_bytes, on_done, name, trace),
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
        trace: Any = None,
    ) -> None:
        try:
            with telemetry.current(trace):
                outcome = self._call(task, request, timeout_s, max_memory_bytes, name)
        except Exception as exc:  # a bug here must still end the callback loudly
            log.exception("planning_callback_runner_failed")
            outcome = CallbackOutcome(failure="callback_worker_down", detail=type(exc).__name__)
        task.done.set()
        if outcome.failure is not None and not task.cancelled:
            # the run reports only the failure's kind: the detail goes to the log
            log.info("planning_callback_failed", failure=outcome.failure, detail=outcome.detail)
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
        try:
            data = call_in_child(
                worker.invoke,
                request,
                name=name,
                limits=Limits(max_memory_bytes=max_memory_bytes),
                timeout=timeout_s,
                control=task.control,
                launcher=self.launcher,
            )
        except ChildCallError as exc:
            return _failed(exc)
        except Exception as exc:
            return CallbackOutcome(failure="callback_worker_down", detail=str(exc))
        try:
            answer = outcomes.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
            return CallbackOutcome(failure="callback_worker_down", detail="bad answer")
        match answer:
            case outcomes.MemoryExceeded():
                return CallbackOutcome(failure="callback_memory_exceeded", pid=task.pid)
            case outcomes.CallbackRaised(error_type=error_type, message=message):
                return CallbackOutcome(
                    failure="callback_exception", detail=f"{error_type}: {message}", pid=task.pid
                )
        return CallbackOutcome(answer=answer, pid=task.pid)


def _failed(exc: ChildCallError) -> CallbackOutcome:
    """The failure for a callback child that gave no answer."""
    reason = exc.reason
    match exc.kind:
        case "child_timeout":
            detail = "start" if exc.pid is None else None
            return CallbackOutcome(failure="callback_timeout", detail=detail, pid=exc.pid)
        case "child_cancelled":
            return CallbackOutcome(failure="callback_worker_down", detail="cancelled", pid=exc.pid)
        case "child_server_lost":
            return CallbackOutcome(failure="callback_server_lost", pid=exc.pid)
        case "child_exited" if reason is not None and reason.kind is ExitKind.HEAP_EXCEEDED:
            return CallbackOutcome(failure="callback_memory_exceeded", pid=exc.pid)
    detail = str(reason) if reason is not None else exc.message
    return CallbackOutcome(failure="callback_worker_down", detail=detail, pid=exc.pid)
