"""Interceptors: the one seam around every agent invocation, model call and tool call.

Features that must see or change those calls — plugins (guardrails, amendments, early
returns, halts), telemetry (a span around each call), cancelling a call in flight, tool
policy and confirmation — each implement `Interceptor` and are installed tree-wide, once,
in an ordered chain. The callers (`LlmAgent`, the agent executors, one-shot runs) go
through the chain and know nothing of who is in it:

    response = chain.model(info, request, model.generate)
    result = chain.tool(info, ToolCall(name, args, call_id), run_the_tool)
    for event in chain.agent(info, lambda: agent.run(ctx)): ...
    agent_run = chain.run(info, RunCall(user_content, cancel), lambda call: drive(call))

Each method is *around* advice: it gets the call's `CallInfo`, the value it guards and
`proceed`, the rest of the chain ending in the real call. It may look at the value, pass
a changed one on, call `proceed` or not (and answer instead — a tool-call interceptor
answers with the tool contract's failure value), wrap `proceed` in a span or a
cancellation scope, or raise `PhloemError` to stop the run. The first interceptor of the
chain is the outermost. An empty chain calls the real operation directly.

`InterceptorRegistry` is the tree's mutable list (features add theirs when they start);
`chain()` snapshots it into an immutable `Interceptors` that one run keeps to its end,
so a registration in the middle of a run never changes that run's behaviour.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from phloem.protocols.content import Content, ModelRequest, ModelResponse

__all__ = [
    "MAX_INTERCEPTORS",
    "NO_INTERCEPTORS",
    "CallInfo",
    "CallKind",
    "Interceptor",
    "InterceptorRegistry",
    "Interceptors",
    "RunCall",
    "ToolCall",
]

MAX_INTERCEPTORS = 256

CallKind = Literal["run", "agent", "model", "tool"]
T = TypeVar("T")
JSON = Any


@dataclass(frozen=True)
class CallInfo:
    """Who is calling what: owner-free, credential-free facts about one call."""

    kind: CallKind
    agent: str
    invocation_id: str = ""
    session_id: str = ""
    app: str = "phloem"
    user: str = "user"
    # The agent's class name for `agent` calls, the model's for `model` calls, the tool's
    # name for `tool` calls.
    target: str = ""
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def derive(self, kind: CallKind, target: str) -> CallInfo:
        """The same caller, another kind of call (a model or tool call inside an agent)."""
        return replace(self, kind=kind, target=target)

    def for_model(self, model: Any) -> CallInfo:
        """A model call to `model`: its class as the target, and in `metadata` what it
        says of itself (`provider_name`, `operation_name`, its `model` or `name`) under
        the GenAI attribute names, for telemetry and plugins."""
        meta = dict(self.metadata)
        meta["gen_ai.provider.name"] = str(getattr(model, "provider_name", "") or "")
        meta["gen_ai.operation.name"] = str(getattr(model, "operation_name", "") or "chat")
        meta["gen_ai.request.model"] = str(
            getattr(model, "model", "") or getattr(model, "name", "") or ""
        )[:256]
        return replace(
            self, kind="model", target=type(model).__name__, metadata=MappingProxyType(meta)
        )


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model asked for it: the name, the arguments and the call id."""

    name: str
    args: Mapping[str, Any]
    id: str | None = None


def _no_cancel(reason: str) -> None:
    return None


@dataclass(frozen=True)
class RunCall:
    """One whole run as interceptors see it: the user's message (None: none) and a way
    to cancel the run (an interceptor that must stop the run calls `cancel(reason)`)."""

    user_content: Content | None
    cancel: Callable[[str], None] = _no_cancel


class Interceptor:
    """Base of interceptors: each method passes the call on unchanged. Override some."""

    name: str = "interceptor"

    def run_call(self, info: CallInfo, call: RunCall, proceed: Callable[[RunCall], T]) -> T:
        """Around one whole run (the runner's; its answer is the finished run)."""
        return proceed(call)

    def agent_call(self, info: CallInfo, proceed: Callable[[], Iterator[T]]) -> Iterator[T]:
        """Around one agent invocation (the events it yields)."""
        return proceed()

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """Around one model call."""
        return proceed(request)

    def tool_call(
        self, info: CallInfo, call: ToolCall, proceed: Callable[[ToolCall], JSON]
    ) -> JSON:
        """Around one tool call; the answer is the tool's result or a failure value."""
        return proceed(call)


class Interceptors:
    """An immutable, ordered chain of interceptors (the first is the outermost)."""

    __slots__ = ("_items",)

    def __init__(self, items: tuple[Interceptor, ...] | list[Interceptor] = ()) -> None:
        items = tuple(items)
        if len(items) > MAX_INTERCEPTORS:
            raise ValueError(f"at most {MAX_INTERCEPTORS} interceptors, got {len(items)}")
        for item in items:
            if not isinstance(item, Interceptor):
                raise TypeError(f"not an Interceptor: {item!r}")
        self._items = items

    @property
    def items(self) -> tuple[Interceptor, ...]:
        return self._items

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def run(self, info: CallInfo, call: RunCall, proceed: Callable[[RunCall], T]) -> T:
        """`proceed(call)` (the whole run) through every interceptor's `run_call`."""
        bound = proceed
        for item in reversed(self._items):
            bound = _bind_run(item, info, bound)
        return bound(call)

    def agent(self, info: CallInfo, run: Callable[[], Iterator[T]]) -> Iterator[T]:
        """The events of `run()` through every interceptor's `agent_call`."""
        call = run
        for item in reversed(self._items):
            call = _bind_agent(item, info, call)
        return call()

    def model(
        self,
        info: CallInfo,
        request: ModelRequest,
        generate: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """`generate(request)` through every interceptor's `model_call`."""
        call = generate
        for item in reversed(self._items):
            call = _bind_model(item, info, call)
        return call(request)

    def tool(self, info: CallInfo, tool_call: ToolCall, run: Callable[[ToolCall], JSON]) -> JSON:
        """`run(tool_call)` through every interceptor's `tool_call`."""
        call = run
        for item in reversed(self._items):
            call = _bind_tool(item, info, call)
        return call(tool_call)


def _bind_run(
    item: Interceptor, info: CallInfo, proceed: Callable[[RunCall], T]
) -> Callable[[RunCall], T]:
    return lambda call: item.run_call(info, call, proceed)


def _bind_agent(
    item: Interceptor, info: CallInfo, proceed: Callable[[], Iterator[T]]
) -> Callable[[], Iterator[T]]:
    return lambda: item.agent_call(info, proceed)


def _bind_model(
    item: Interceptor, info: CallInfo, proceed: Callable[[ModelRequest], ModelResponse]
) -> Callable[[ModelRequest], ModelResponse]:
    return lambda request: item.model_call(info, request, proceed)


def _bind_tool(
    item: Interceptor, info: CallInfo, proceed: Callable[[ToolCall], JSON]
) -> Callable[[ToolCall], JSON]:
    return lambda call: item.tool_call(info, call, proceed)


NO_INTERCEPTORS = Interceptors()


class InterceptorRegistry:
    """The tree's interceptors, in registration order; `chain()` snapshots them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chain = NO_INTERCEPTORS

    def add(self, interceptor: Interceptor, *, first: bool = False) -> None:
        """Append `interceptor` (or put it outermost with `first=True`)."""
        with self._lock:
            items = self._chain.items
            if any(existing is interceptor for existing in items):
                raise ValueError(f"interceptor {interceptor.name!r} is already registered")
            merged = (interceptor, *items) if first else (*items, interceptor)
            self._chain = Interceptors(merged)

    def remove(self, interceptor: Interceptor) -> bool:
        """Take `interceptor` out; False if it was not registered."""
        with self._lock:
            items = self._chain.items
            kept = tuple(item for item in items if item is not interceptor)
            self._chain = Interceptors(kept)
            return len(kept) != len(items)

    def replace(self, old: Interceptor, new: Interceptor) -> None:
        """Put `new` where `old` is (runs already started keep `old`); `old` must be there."""
        with self._lock:
            items = self._chain.items
            if not any(item is old for item in items):
                raise ValueError(f"interceptor {old.name!r} is not registered")
            if any(item is new for item in items):
                raise ValueError(f"interceptor {new.name!r} is already registered")
            self._chain = Interceptors(tuple(new if item is old else item for item in items))

    def chain(self) -> Interceptors:
        """The current chain (immutable: later registrations do not change it)."""
        with self._lock:
            return self._chain
