"""Run a `FunctionAgent`'s callable in a capped process child (`isolate=True`).

The child receives the function and its keyword arguments, calls it, and sends the
return value back over its channel (msgpack). Under a supervised executor the child is a
temporary child of the run's supervisor; otherwise it is started directly. A crash,
a memory cap (`heap_exceeded`) or a timeout ends only the child, and comes back as a
`PhloemError` whose kind says which; cancelling the run kills the child.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from phloem.actors.agents.executor import exit_error_kind
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision.channel import Channel, ChannelError, ChannelTimeout
from phloem.supervision.handle import ChildHandle
from phloem.supervision.process import ProcessHandle, start_process
from phloem.supervision.reasons import ExitKind
from phloem.supervision.spec import ChildSpec, ProcessTarget

if TYPE_CHECKING:
    from phloem.actors.agents.context import InvocationContext
    from phloem.actors.agents.function_agent import FunctionAgent

_ids = itertools.count(1)


def _child_main(channel: Channel, fn: Any, kwargs: dict[str, Any]) -> None:
    """Runs in the child: call, send the value back, exit (an exception exits the child)."""
    channel.send({"value": fn(**kwargs)})


def call_isolated(agent: FunctionAgent, kwargs: dict[str, Any], ctx: InvocationContext) -> Any:
    """Call `agent.fn(**kwargs)` in a process child; its return value."""
    target = ProcessTarget(_child_main, (agent.fn, kwargs), pass_channel=True)
    child_id = f"{agent.name}.process#{next(_ids)}"
    supervisor = getattr(ctx.executor, "supervisor", None)
    handle: ChildHandle
    if supervisor is not None:
        handle = supervisor.start_child(
            ChildSpec(child_id, target, restart="temporary", shutdown=1.0, limits=agent.limits)
        )
    else:
        handle = start_process(target, name=child_id, limits=agent.limits)
    assert isinstance(handle, ProcessHandle)

    def kill() -> None:
        handle.kill()

    ctx.cancel.on_cancel(kill)
    try:
        reply = handle.recv(timeout=agent.timeout_s)
    except ChannelTimeout:
        handle.kill()
        raise PhloemError(
            ErrorKind.AGENT_TIMEOUT, f"{agent.name}: no result within {agent.timeout_s}s"
        ) from None
    except ChannelError:
        reason = handle.wait(timeout=5.0)
        if ctx.cancel.cancelled:
            raise PhloemError(ErrorKind.CANCELLED, f"{agent.name}: cancelled") from None
        if reason is None:
            handle.kill()
            reason = handle.wait(timeout=5.0)
        if reason is None or reason.kind in (ExitKind.EXCEPTION, ExitKind.NORMAL):
            kind = ErrorKind.AGENT_ERROR
        else:
            kind = exit_error_kind(reason.kind)
        raise PhloemError(kind, f"{agent.name}: process child ended: {reason}") from None
    finally:
        ctx.cancel.remove(kill)
    handle.wait(timeout=5.0)
    if not isinstance(reply, dict) or "value" not in reply:
        raise PhloemError(ErrorKind.INVALID_OUTPUT, f"{agent.name}: malformed reply from the child")
    return reply["value"]
