"""Cancelling a model call in flight: the cancel scope (the transport that obeys it is
`phloem.models.cancel_transport`, which loads httpx; this module does not).

A run that can be cancelled wraps each model call in `cancel_scope(is_cancelled)`, a
predicate of the run's own cancellation (an `LlmAgent` passes its run's `CancelToken`, a
one-shot run its `threading.Event`). The scope is a context variable, so the model code
underneath needs no extra argument. Our providers' HTTP client reads and writes through
`cancel_transport.cancellable_transport()`: its network streams wait for data in slices of
`CANCEL_POLL_S` and check the scope between them, so a call hanging at a provider fails
with `ModelError` `cancelled` within that time of the cancel, and its connection is
closed (never reused). Retry back-off sleeps stop too (`sleep`).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from typing import Final

from phloem.protocols.errors import ErrorKind
from phloem.protocols.model import ModelError

CANCEL_POLL_S: Final = 0.05
"""How often a blocked read (or a back-off sleep) checks for cancellation."""

_scope: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "phloem_cancel_scope", default=None
)
Subscribe = Callable[[Callable[[], None]], Callable[[], None]]
"""`subscribe(callback) -> undo`: call `callback()` once when cancelled (at once if
already), until `undo()`."""
_subscribe: contextvars.ContextVar[Subscribe | None] = contextvars.ContextVar(
    "phloem_cancel_subscribe", default=None
)


@contextlib.contextmanager
def cancel_scope(
    is_cancelled: Callable[[], bool], subscribe: Subscribe | None = None
) -> Iterator[None]:
    """Model calls made inside stop when `is_cancelled()` turns true; with `subscribe`,
    a parked wait (`phloem.models.waiting`) is woken by the cancel itself, not a poll."""
    token = _scope.set(is_cancelled)
    sub = _subscribe.set(subscribe)
    try:
        yield
    finally:
        _subscribe.reset(sub)
        _scope.reset(token)


def _nothing() -> None:
    return None


def on_cancel(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback()` when the current scope is cancelled (a scope without
    `subscribe`, or none: never); returns the undo."""
    subscribe = _subscribe.get()
    if subscribe is None:
        return _nothing
    return subscribe(callback)


def cancelled() -> bool:
    """True when the current scope's run is cancelled."""
    check = _scope.get()
    return check is not None and check()


def cancelled_error(provider: str) -> ModelError:
    return ModelError(ErrorKind.CANCELLED, f"{provider} request cancelled in flight")


def sleep(seconds: float) -> None:
    """`time.sleep` that ends early (raising `cancelled`) when the scope is cancelled."""
    deadline = time.monotonic() + seconds
    while True:
        if cancelled():
            raise cancelled_error("model")
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, CANCEL_POLL_S))
