"""Stateful plugin instances: one supervised, temporary child each.

`stateful = true` makes a plugin an object with `init(config) -> state`,
`handle(hook, ctx, value, state) -> (outcome, new_state)` and `terminate(state)`, run by
an `InstanceActor` under `plugins/instances` (`instance:NAME` in `phloem tree`):

- calls are serialized (the actor's inbox) and bounded: `max_queue` waiting → `queue_full`;
- `init` must answer within `init_timeout_ms`, else the instance does not start;
- the state is bounded: its msgspec (msgpack) encoding over `max_state_bytes` is refused
  (`plugin_state_too_large`) and the old state stays;
- a new state commits only if `handle` finished before the caller's deadline and the
  caller is still there (its thread alive, it did not give up); `generation` counts commits;
- the child is temporary: a `handle` that raises (or, isolated, a process child that dies,
  hits its memory cap or overruns its deadline) ends the instance for good — its hooks then
  fail as `plugin_unavailable` under the plugin's failure policy; nothing restarts it
  with an empty state behind the same name.

With `isolate = true` the actor keeps the state and runs `init`/`handle` in a long-lived
capped process child of its own (the state travels with each call as plain data).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.actors.plugins.protocol import InstanceStatus
from phloem.actors.plugins.slots import (
    HookFailure,
    decode_outcome,
    decode_value,
    encode_outcome,
    encode_value,
    run_with_timeout,
)
from phloem.agents.hooks import PluginContext
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.secrets import redact
from phloem.supervision.actor import Actor, ActorHandle, tell_if_alive
from phloem.supervision.channel import ChannelError
from phloem.supervision.handle import ChildStartError
from phloem.supervision.process import ProcessHandle
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import (
    ChildSpec,
    Limits,
    ProcessTarget,
    SupervisorChild,
    SupervisorSpec,
)
from phloem.supervision.supervisor import SupervisorRef

if TYPE_CHECKING:
    from phloem.actors.plugins.slots import PluginSlot

log = get_logger("phloem.plugins")

PROCESS_ID = "process"  # an isolated instance's process child
STATE_ID = "state"  # the actor keeping its state


@dataclass
class _HookCall:
    hook: str
    ctx: PluginContext
    value: Any
    deadline: float
    caller: threading.Thread
    abandoned: threading.Event


class Instance:
    """The callers' side of one instance: its handle, its status, `call`."""

    def __init__(self, slot: PluginSlot, on_down: Callable[[str], None] | None = None) -> None:
        self.slot = slot
        self.id = f"instance:{slot.name}"
        self.handle: ActorHandle | None = None
        self.busy = False
        self.generation = 0
        self.state_bytes = 0
        self.exit = ""
        self._on_down = on_down
        self.ready = threading.Event()  # set once `init` ran (or failed)
        self.init_error = ""

    def spec(self) -> ChildSpec:
        """The instance's child: its actor; isolated, a small supervisor of the long-lived
        process child (`process`) and the actor that keeps the state (`state`)."""
        actor: tuple[Any, tuple[Any, ...], dict[str, Any]] = (InstanceActor, (self,), {})
        if not self.slot.options.isolate:
            return ChildSpec(self.id, actor, restart="temporary", shutdown=5.0)
        state = ChildSpec(STATE_ID, actor, restart="temporary", shutdown=5.0)
        group = SupervisorChild(SupervisorSpec(intensity=0), [state])
        return ChildSpec(self.id, group, restart="temporary")

    def process_spec(self) -> ChildSpec:
        """The isolated instance's long-lived process child (started by its actor)."""
        opts = self.slot.options
        target = ProcessTarget(
            serve_instance, (self.slot.plugin, dict(opts.config)), pass_channel=True
        )
        return ChildSpec(
            PROCESS_ID,
            target,
            restart="temporary",
            shutdown=1.0,
            limits=Limits(max_memory_bytes=opts.max_memory_bytes),
        )

    def wait_ready(self, timeout: float) -> str:
        """Wait for an isolated instance's `init`: "" when it is ready, else why not."""
        if not self.ready.wait(timeout):
            return f"init did not finish within {timeout:g}s"
        return self.init_error

    @property
    def available(self) -> bool:
        return self.handle is not None and self.handle.is_alive()

    def call(self, hook: str, ctx: PluginContext, value: Any, timeout_s: float) -> Any:
        handle = self.handle
        if handle is None or not handle.is_alive():
            raise HookFailure(
                ErrorKind.PLUGIN_UNAVAILABLE,
                f"{self.slot.name}: the instance is down ({self.exit or 'not started'})",
            )
        call = _HookCall(
            hook,
            ctx,
            value,
            time.monotonic() + timeout_s,
            threading.current_thread(),
            threading.Event(),
        )
        try:
            answer = handle.ask(call, timeout=timeout_s)
        except PhloemError as err:
            call.abandoned.set()
            if err.kind == ErrorKind.BACKPRESSURE:
                raise HookFailure(
                    ErrorKind.QUEUE_FULL,
                    f"{self.slot.name}: {self.slot.options.max_queue} calls waiting",
                ) from None
            if err.kind == ErrorKind.TIMEOUT:
                raise HookFailure(
                    ErrorKind.PLUGIN_TIMEOUT,
                    f"{self.slot.name}.{hook}: no answer in {timeout_s:g}s",
                ) from None
            raise HookFailure(
                ErrorKind.PLUGIN_UNAVAILABLE, f"{self.slot.name}: {err.message}"
            ) from None
        if isinstance(answer, HookFailure):
            raise answer
        return answer

    def status(self) -> InstanceStatus:
        handle = self.handle
        return InstanceStatus(
            id=self.id,
            available=self.available,
            busy=self.busy and self.available,
            queued=handle.mailbox_depth() if handle is not None and self.available else 0,
            generation=self.generation,
            state_bytes=self.state_bytes,
            exit=self.exit,
        )

    def _exited(self, reason: ExitReason) -> None:
        self.exit = str(reason)
        quiet = reason.kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN)
        report = log.info if quiet else log.warning
        report("plugin_instance_down", plugin=self.slot.name, reason=self.exit)
        if not quiet and self.slot.options.isolate and self._on_down is not None:
            self._on_down(self.id)  # its supervisor goes too: down for good, not restarted


class InstanceActor(Actor):
    """Runs one instance's calls one at a time and keeps its state."""

    def __init__(self, instance: Instance) -> None:
        super().__init__()
        self.instance = instance
        self.slot = instance.slot
        self.max_inbox = self.slot.options.max_queue  # type: ignore[misc]
        self.state: Any = None
        self.process: ProcessHandle | None = None

    def on_start(self) -> None:
        opts = self.slot.options
        timeout = opts.init_timeout_ms / 1000
        if opts.isolate:
            # The process child is started under this actor's own supervisor, which is
            # still starting us: `_Init` (first in the inbox) does it once we are running.
            self.actor_ref.tell(_Init())
            state = None
        else:
            plugin, config = self.slot.plugin, dict(opts.config)
            try:
                state = run_with_timeout(
                    lambda: plugin.init(config), timeout, f"{self.slot.name}.init"
                )
            except HookFailure as exc:
                raise ChildStartError(ExitReason.timeout(exc.message)) from None
        size = _state_size(state)
        if size is None or size > opts.max_state_bytes:
            raise ChildStartError(
                ExitReason.killed(f"init state over {opts.max_state_bytes} bytes")
            )
        self.state, self.instance.state_bytes = state, size
        if not opts.isolate:
            self.instance.ready.set()
        handle = self._phloem_handle
        assert handle is not None
        self.instance.handle = handle
        self.instance.exit = ""
        handle.add_exit_callback(self.instance._exited)

    def on_stop(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                try:
                    self.process.request(["terminate", self.state], 1.0)
                except ChannelError as exc:
                    log.info("plugin_terminate_failed", plugin=self.slot.name, error=str(exc))
                self.process.stop(1.0)
            return
        terminate = getattr(self.slot.plugin, "terminate", None)
        if callable(terminate):
            try:
                run_with_timeout(lambda: terminate(self.state), 1.0, f"{self.slot.name}.terminate")
            except HookFailure as exc:
                log.warning("plugin_terminate_failed", plugin=self.slot.name, error=exc.message)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Init):
            self._init_child()
            return None
        if isinstance(message, _ProcessDown):  # the process child died between calls
            self.exit(ExitReason.from_exception(RuntimeError(f"process child: {message.reason}")))
            return None
        if not isinstance(message, _HookCall):
            return None
        call = message
        if call.abandoned.is_set() or time.monotonic() >= call.deadline:
            return HookFailure(ErrorKind.PLUGIN_TIMEOUT, f"{self.slot.name}: expired while queued")
        self.instance.busy = True
        try:
            return self._handle(call)
        finally:
            self.instance.busy = False

    def _handle(self, call: _HookCall) -> Any:
        name = f"{self.slot.name}.{call.hook}"
        try:
            if self.process is not None:
                outcome, new_state = self._in_child(call)
            else:
                answer = self.slot.plugin.handle(call.hook, call.ctx, call.value, self.state)
                if not isinstance(answer, tuple) or len(answer) != 2:
                    return HookFailure(
                        ErrorKind.PLUGIN_CONTRACT_VIOLATION,
                        f"{name}: handle must return (outcome, new_state)",
                    )
                outcome, new_state = answer
        except Exception as exc:
            failure = HookFailure(
                ErrorKind.PLUGIN_EXCEPTION, redact(f"{name}: {type(exc).__name__}: {exc}")
            )
            self.exit(ExitReason.from_exception(exc))  # temporary: down for good
            return failure
        if time.monotonic() > call.deadline or call.abandoned.is_set():
            return HookFailure(ErrorKind.PLUGIN_TIMEOUT, f"{name}: finished late; not committed")
        if not call.caller.is_alive():
            return HookFailure(ErrorKind.PLUGIN_UNAVAILABLE, f"{name}: its caller is gone")
        size = _state_size(new_state)
        limit = self.slot.options.max_state_bytes
        if size is None or size > limit:
            return HookFailure(
                ErrorKind.PLUGIN_STATE_TOO_LARGE,
                f"{name}: new state {'is not encodable' if size is None else f'is {size} bytes'}"
                f" (max_state_bytes {limit}); kept the old one",
            )
        self.state = new_state
        self.instance.state_bytes = size
        self.instance.generation += 1
        return outcome

    def _init_child(self) -> None:
        """Start the process child under our supervisor and run `init` in it; a failure
        ends the instance (and `Instance.wait_ready` says why)."""
        opts = self.slot.options
        timeout = opts.init_timeout_ms / 1000
        deadline = time.monotonic() + timeout
        handle = self._phloem_handle
        try:
            while handle is None or not isinstance(handle._parent, SupervisorRef):
                if time.monotonic() > deadline:  # the supervisor records us right after start
                    raise RuntimeError("no supervisor to start the process child under")
                time.sleep(0.001)
            process = handle._parent.start_child(self.instance.process_spec())
            if not isinstance(process, ProcessHandle):
                raise RuntimeError("the process child is not a process")
            self.process = process
            state = process.recv(max(0.0, deadline - time.monotonic()))
            size = _state_size(state)
            if size is None or size > opts.max_state_bytes:
                raise RuntimeError(f"init state over {opts.max_state_bytes} bytes")
        except (PhloemError, ChannelError, RuntimeError) as exc:
            self.instance.init_error = redact(f"init: {exc}")
            self.instance.ready.set()
            self.exit(ExitReason.from_exception(RuntimeError(self.instance.init_error)))
            return
        self.state, self.instance.state_bytes = state, size
        me = self.actor_ref
        process.add_exit_callback(lambda reason: tell_if_alive(me, _ProcessDown(reason)))
        self.instance.ready.set()

    def _in_child(self, call: _HookCall) -> tuple[Any, Any]:
        process = self.process
        assert process is not None
        left = max(0.0, call.deadline - time.monotonic())
        ctx = {f.name: getattr(call.ctx, f.name) for f in fields(call.ctx)}
        ctx["metadata"] = dict(call.ctx.metadata)
        request = ["handle", call.hook, ctx, encode_value(call.value), self.state]
        try:
            answer = process.request(request, left)
        except ChannelError as exc:
            process.kill()
            reason = process.wait(5.0) or ExitReason.killed()
            raise RuntimeError(f"process child gone ({reason}): {exc}") from None
        return decode_outcome(answer[0]), answer[1]


def _state_size(state: Any) -> int | None:
    try:
        return len(msgspec.msgpack.encode(state))
    except (TypeError, msgspec.EncodeError, OverflowError):
        return None


class _Init:
    __slots__ = ()


class _ProcessDown:
    __slots__ = ("reason",)

    def __init__(self, reason: ExitReason) -> None:
        self.reason = reason


def serve_instance(channel: Any, plugin: Any, config: dict[str, Any]) -> None:
    """Runs in the isolated instance's process child: `init`, then one `handle` per
    request, until `terminate`."""
    channel.send(plugin.init(config))
    while True:
        request = channel.recv(None)
        if request[0] == "terminate":
            terminate = getattr(plugin, "terminate", None)
            if callable(terminate):
                terminate(request[1])
            channel.send(None)
            return
        _, hook, ctx, value, state = request
        context = PluginContext(**ctx)
        outcome, new_state = plugin.handle(hook, context, decode_value(value), state)
        channel.send([encode_outcome(outcome), new_state])
