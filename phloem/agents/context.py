"""What a running agent sees: `InvocationContext`, and the run's `CancelToken`.

The context is read-only: `state` is a snapshot (for agents of a parallel group, the
state as of the group's start), `events` the history so far. Agents change state only by
yielding events whose actions carry a `state_delta`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from phloem.agents.events import Event, new_invocation_id
from phloem.base.logs import get_logger
from phloem.models.interceptors import NO_INTERCEPTORS, Interceptors
from phloem.protocols.content import Content, Usage
from phloem.protocols.errors import ErrorValue

if TYPE_CHECKING:
    from phloem.agents.executor import GroupExecutor

log = get_logger("phloem.agents")


class CancelToken:
    """A one-way cancellation flag with callbacks, shared by everything one run starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        # Made by the first `wait` only: most runs never block on their token, and an
        # Event (its Condition, lock and waiter deque) is ~0.8 KiB of every waiting run.
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.reason: str | None = None
        # Set when the cancel stops the run with an error of its own (a plugin's halt).
        self.error: ErrorValue | None = None

    @property
    def cancelled(self) -> bool:
        return self._set

    def cancel(self, reason: str = "cancelled", error: ErrorValue | None = None) -> None:
        """Set the flag (first reason wins) and run the registered callbacks once; `error`
        is what the run then ends with, when the cancel is a stop (a plugin's halt)."""
        with self._lock:
            if self._set:
                return
            self.reason = reason
            self.error = error
            self._set = True
            event, callbacks, self._callbacks = self._event, self._callbacks, []
        if event is not None:
            event.set()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("cancel_callback_failed")

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when cancelled (at once if already cancelled)."""
        with self._lock:
            if not self._set:
                self._callbacks.append(callback)
                return
        callback()

    def remove(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled (True) or `timeout` seconds pass (False)."""
        with self._lock:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


class UsageMeter:
    """The model calls and tokens of one run, summed across every agent it invokes
    (shared, like the `CancelToken`, by every context derived from the run's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.usage = Usage()

    def add(self, usage: Usage | None) -> None:
        """Count one model call and its usage (None: the provider reported none)."""
        with self._lock:
            self.calls += 1
            if usage is not None:
                self.usage = self.usage + usage


@dataclass(frozen=True)
class InvocationContext:
    """One agent invocation's view of the world (immutable)."""

    state: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[Event, ...] = ()
    user_content: Content | None = None
    invocation_id: str = field(default_factory=new_invocation_id)
    app: str = "phloem"
    user: str = "user"
    session_id: str = ""
    cancel: CancelToken = field(default_factory=CancelToken)
    executor: GroupExecutor | None = None
    # The tree's interceptors, snapshot at the run's start (plugins, telemetry, policy).
    interceptors: Interceptors = NO_INTERCEPTORS
    # Model calls and tokens of the whole run (outcome.usage of a run that is not a
    # planner's own is this; a planner's adds it to its supervisor's calls).
    usage: UsageMeter = field(default_factory=UsageMeter)

    def __post_init__(self) -> None:
        if not isinstance(self.state, MappingProxyType):
            object.__setattr__(self, "state", MappingProxyType(dict(self.state)))

    @property
    def cancelled(self) -> bool:
        return self.cancel.cancelled

    def derive(self, **changes: Any) -> InvocationContext:
        """A copy with some fields replaced (state is snapshotted again)."""
        return replace(self, **changes)
