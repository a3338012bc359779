"""Run a `FunctionAgent`'s callable in a capped process child (`isolate=True`).

The call goes through `phloem.supervision.childcall.call_in_child`: the child receives
the function and its keyword arguments, calls it, and sends the return value back over
its channel (msgpack). Under a supervised executor the child is a temporary child of the
run's supervisor; otherwise it is started directly. When the executor has a `launcher`
(`[cluster]` kinds `isolated_agents` and, in eval runs, `eval_cases`) the child is a call
on a cluster worker instead, with the same outcomes. A crash, a memory cap
(`heap_exceeded`) or a timeout ends only the child, and comes back as a `PhloemError`
whose kind says which (`agent_error`, `agent_heap_exceeded`, `agent_killed`, ...,
`agent_timeout`); cancelling the run kills the child (`cancelled`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from phloem.agents.executor import exit_error_kind
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision import forkserver
from phloem.supervision.childcall import CallControl, ChildCallError, Starter, call_in_child
from phloem.supervision.handle import ChildHandle
from phloem.supervision.reasons import ExitKind
from phloem.supervision.spec import ChildSpec, Launcher, Limits, ProcessTarget, RemoteTarget

if TYPE_CHECKING:
    from phloem.agents.context import InvocationContext
    from phloem.agents.function_agent import FunctionAgent

_ids = itertools.count(1)


def _apply(call: tuple[Callable[..., Any], dict[str, Any]]) -> Any:
    """Runs in the child: `fn(**kwargs)` (an exception ends the child)."""
    fn, kwargs = call
    return fn(**kwargs)


def preload_for(fn: Callable[..., Any]) -> None:
    """Ask the fork server to import this module (the child's side of the call) and
    `fn`'s, so that an isolated call's child starts without importing them anew (~40 ms
    each call otherwise). Called for every isolated agent when it is made, as planning
    and plugins do for their components; a function of `__main__` is left out."""
    modules = [__name__]
    module = getattr(fn, "__module__", None)
    if isinstance(module, str) and module not in ("__main__", "builtins"):
        modules.append(module)
    forkserver.add_preload(modules)


def call_isolated(agent: FunctionAgent, kwargs: dict[str, Any], ctx: InvocationContext) -> Any:
    """Call `agent.fn(**kwargs)` in a process child; its return value."""
    child_id = f"{agent.name}.process#{next(_ids)}"
    supervisor = getattr(ctx.executor, "supervisor", None)
    launcher: Launcher | None = getattr(ctx.executor, "launcher", None)
    control = CallControl()
    ctx.cancel.on_cancel(control.cancel)
    try:
        return call_in_child(
            _apply,
            (agent.fn, kwargs),
            name=child_id,
            limits=agent.limits,
            timeout=agent.timeout_s,
            control=control,
            start=None
            if supervisor is None
            else _under(supervisor, child_id, agent.limits, launcher),
            launcher=launcher,
        )
    except ChildCallError as exc:
        raise _agent_error(agent, exc) from None
    finally:
        ctx.cancel.remove(control.cancel)


def _under(supervisor: Any, child_id: str, limits: Limits, launcher: Launcher | None) -> Starter:
    """Start the child as a temporary child of the run's supervisor (on the cluster when
    there is a launcher)."""

    def start(target: ProcessTarget, ready_timeout: float) -> ChildHandle:
        what = target if launcher is None else RemoteTarget(target, launcher)
        spec = ChildSpec(child_id, what, restart="temporary", shutdown=1.0, limits=limits)
        handle: ChildHandle = supervisor.start_child(spec)
        return handle

    return start


def _agent_error(agent: FunctionAgent, exc: ChildCallError) -> PhloemError:
    reason = exc.reason
    if exc.kind == ErrorKind.CHILD_CANCELLED:
        return PhloemError(ErrorKind.CANCELLED, f"{agent.name}: cancelled")
    if exc.kind == ErrorKind.CHILD_TIMEOUT:
        return PhloemError(
            ErrorKind.AGENT_TIMEOUT, f"{agent.name}: no result within {agent.timeout_s}s"
        )
    if reason is None or reason.kind in (ExitKind.EXCEPTION, ExitKind.NORMAL):
        kind = ErrorKind.AGENT_ERROR  # a normal exit without a reply is the function's fault
    else:
        kind = exit_error_kind(reason.kind)
    what = "did not start" if exc.kind == ErrorKind.CHILD_START_FAILED else "ended"
    return PhloemError(kind, f"{agent.name}: process child {what}: {reason}")
