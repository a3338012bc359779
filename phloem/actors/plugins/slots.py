"""One registered plugin and how its hooks are called: `PluginSlot`.

A slot holds the plugin, its options (mode, failure policy, timeout, size bound,
isolation) and its counters, and calls one hook in one of three ways:

- in process (the default): on a hook thread of a small daemon pool, waited for at most
  `timeout_ms` — a hook that hangs is abandoned on its thread (the pool is bounded by
  `MAX_HOOK_THREADS`; a full pool is a timeout), never waited for. Python cannot stop a
  thread, so an abandoned hook keeps running, with no memory cap, until it returns: the
  slot counts them (`overrunning`, shown by `phloem plugin list`) and its answer is
  discarded. A plugin that may hang or hog memory belongs in `isolate = true`;
- `isolate = true`: in a capped process child (`call_in_child`, `max_memory_bytes`,
  the deadline kills it); the answer comes back as plain data, typed again here;
- `stateful = true`: as a request to the plugin's instance (`phloem.actors.plugins.instance`).

Whatever goes wrong is a `HookFailure` with a stable kind: `plugin_exception`,
`plugin_timeout`, `plugin_unavailable`, `queue_full`, `plugin_state_too_large`.
Checking the answer (mode, hook, size) is the interceptor's job.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from phloem.actors.plugins.settings import PluginOptions
from phloem.agents.hooks import (
    Amend,
    Halt,
    Outcome,
    PluginContext,
    Return,
    RunSummary,
    ToolCall,
    ToolResult,
)
from phloem.protocols.content import Content, ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.secrets import redact
from phloem.supervision import fibers
from phloem.supervision.childcall import ChildCallError, call_in_child
from phloem.supervision.spec import Limits

if TYPE_CHECKING:
    from phloem.actors.plugins.instance import Instance

Mode = Literal["observe", "intervene"]
Policy = Literal["open", "closed"]

MAX_HOOK_THREADS = 64
"""Hook threads at most (busy ones included: a hung hook keeps its thread)."""
MAX_FAILURE_TEXT = 300


class HookFailure(PhloemError):
    """A hook gave no usable answer; `kind` says why."""


class PluginSlot:
    """One plugin as registered: name, object, hooks, options, counters."""

    def __init__(
        self,
        name: str,
        plugin: Any,
        hooks: tuple[str, ...],
        options: PluginOptions,
        source: str,
        default_mode: Mode = "observe",
    ) -> None:
        self.name = name
        self.mode: Mode = options.mode or default_mode
        self.plugin = plugin
        self.hooks = hooks
        self.options = options
        self.source = source
        self.instance: Instance | None = None
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0
        self.last_failure = ""
        self.overrunning = 0  # in-process hook calls past their deadline, still running

    def _overran(self, delta: int) -> None:
        with self._lock:
            self.overrunning += delta

    @property
    def timeout_s(self) -> float:
        return self.options.timeout_ms / 1000

    def record_failure(self, error: PhloemError) -> None:
        with self._lock:
            self.failures += 1
            self.last_failure = redact(f"{error.kind}: {error.message}")[:MAX_FAILURE_TEXT]

    def invoke(self, hook: str, ctx: PluginContext, value: Any) -> Any:
        """The hook's raw answer; `HookFailure` if there is none. A run driven as a fiber
        waits for it parked (the call blocks: a hook thread, a child, an instance)."""
        return fibers.offload(self._invoke, hook, ctx, value)

    def _invoke(self, hook: str, ctx: PluginContext, value: Any) -> Any:
        with self._lock:
            self.calls += 1
        if self.options.stateful:
            instance = self.instance
            if instance is None:
                raise HookFailure(ErrorKind.PLUGIN_UNAVAILABLE, f"{self.name}: not started")
            return instance.call(hook, ctx, value, self.timeout_s)
        if self.options.isolate:
            return self._isolated(hook, ctx, value)
        return run_with_timeout(
            lambda: getattr(self.plugin, hook)(ctx, value),
            self.timeout_s,
            f"{self.name}.{hook}",
            on_overrun=self._overran,
        )

    def _isolated(self, hook: str, ctx: PluginContext, value: Any) -> Any:
        limits = Limits(max_memory_bytes=self.options.max_memory_bytes)
        try:
            encoded = call_in_child(
                run_hook_encoded,
                (self.plugin, hook, ctx, value),
                name=f"plugin:{self.name}.{hook}",
                limits=limits,
                timeout=self.timeout_s,
            )
        except ChildCallError as exc:
            kind = (
                ErrorKind.PLUGIN_TIMEOUT
                if exc.kind == ErrorKind.CHILD_TIMEOUT
                else ErrorKind.PLUGIN_EXCEPTION
            )
            raise HookFailure(kind, f"{self.name}.{hook}: {exc.message}") from None
        return decode_outcome(encoded)


# --- the hook threads -------------------------------------------------------------------


class _HookThreads:
    """Daemon threads that run hooks; idle ones are reused, at most `MAX_HOOK_THREADS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Any]] = []
        self._count = 0

    def submit(self, job: Callable[[], None]) -> bool:
        with self._lock:
            if self._idle:
                inbox = self._idle.pop()
            elif self._count < MAX_HOOK_THREADS:
                self._count += 1
                inbox = queue.SimpleQueue()
                threading.Thread(
                    target=self._work, args=(inbox,), name="phloem-plugin-hook", daemon=True
                ).start()
            else:
                return False
        inbox.put(job)
        return True

    def _work(self, inbox: queue.SimpleQueue[Any]) -> None:
        while True:
            job = inbox.get()
            job()
            with self._lock:
                self._idle.append(inbox)


_threads = _HookThreads()


def run_with_timeout(
    fn: Callable[[], Any],
    timeout_s: float,
    what: str,
    on_overrun: Callable[[int], None] | None = None,
) -> Any:
    """`fn()` on a hook thread, waited for at most `timeout_s`; `HookFailure` otherwise.
    A call past its deadline runs on: `on_overrun(1)` when it is given up on,
    `on_overrun(-1)` when it finally returns."""
    reply: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
    lock = threading.Lock()
    given_up = False

    def job() -> None:
        try:
            reply.put((True, fn()))
        except BaseException as exc:  # the hook's failure, reported to its caller
            reply.put((False, exc))
        with lock:
            late = given_up
        if late and on_overrun is not None:
            on_overrun(-1)

    if not _threads.submit(job):
        raise HookFailure(ErrorKind.PLUGIN_TIMEOUT, f"{what}: every hook thread is busy")
    try:
        ok, value = reply.get(timeout=timeout_s)
    except queue.Empty:
        with lock:
            given_up = reply.empty()  # it may have answered just now: then it has ended
            late = given_up
        if late and on_overrun is not None:
            on_overrun(1)
        raise HookFailure(
            ErrorKind.PLUGIN_TIMEOUT, f"{what}: no answer within {timeout_s:g}s"
        ) from None
    if not ok:
        if isinstance(value, HookFailure):
            raise value
        raise HookFailure(
            ErrorKind.PLUGIN_EXCEPTION, redact(f"{what}: {type(value).__name__}: {value}")
        )
    return value


def deadline_left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


# --- outcomes as plain data (process children answer with msgpack-able values) ---------

_TYPES: dict[str, Any] = {
    "ModelRequest": ModelRequest,
    "ModelResponse": ModelResponse,
    "Content": Content,
    "ErrorValue": ErrorValue,
    "ToolCall": ToolCall,
    "ToolResult": ToolResult,
    "RunSummary": RunSummary,
}


def _enc_hook(obj: Any) -> Any:
    if hasattr(obj, "items"):
        return dict(obj.items())
    raise TypeError(f"cannot encode {type(obj).__name__}")


def encode_value(value: Any) -> list[Any]:
    name = type(value).__name__
    if name == "Event":
        return ["Event", msgspec.to_builtins(value, enc_hook=_enc_hook)]
    if name in _TYPES and isinstance(value, _TYPES[name]):
        return [name, msgspec.to_builtins(value, enc_hook=_enc_hook)]
    return ["json", msgspec.to_builtins(value, enc_hook=_enc_hook)]


def decode_value(data: list[Any]) -> Any:
    name, body = data
    if name == "json":
        return body
    if name == "Event":
        from phloem.agents.events import Event

        return msgspec.convert(body, Event)
    if name in ("ToolCall", "ToolResult"):
        return _TYPES[name](**body)
    return msgspec.convert(body, _TYPES[name])


def encode_outcome(outcome: Outcome) -> list[Any]:
    if outcome is None:
        return ["none"]
    if isinstance(outcome, Halt):
        return ["halt", str(outcome.reason)]
    if isinstance(outcome, Amend | Return):
        kind = "amend" if isinstance(outcome, Amend) else "return"
        return [kind, encode_value(outcome.value)]
    return ["bad", type(outcome).__name__]


def decode_outcome(data: Any) -> Any:
    """An outcome sent as plain data, typed again (`bad`: what the plugin returned)."""
    try:
        kind = data[0]
        if kind == "none":
            return None
        if kind == "halt":
            return Halt(str(data[1]))
        if kind == "amend":
            return Amend(decode_value(data[1]))
        if kind == "return":
            return Return(decode_value(data[1]))
        return f"<{data[1]}>"
    except (IndexError, KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
        raise HookFailure(ErrorKind.PLUGIN_EXCEPTION, f"undecodable answer: {exc}") from None


def run_hook_encoded(arg: tuple[Any, str, PluginContext, Any]) -> list[Any]:
    """Runs in a process child: the hook's outcome as plain data."""
    plugin, hook, ctx, value = arg
    return encode_outcome(getattr(plugin, hook)(ctx, value))
