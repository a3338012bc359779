"""Cancelling a model call in flight: a cancel scope, and an HTTP transport that obeys it.

A run that can be cancelled wraps each model call in `cancel_scope(is_cancelled)`, a
predicate of the run's own cancellation (an `LlmAgent` passes its run's `CancelToken`, a
one-shot run its `threading.Event`). The scope is a context variable, so the model code
underneath needs no extra argument. Our providers' HTTP client reads and writes through
`cancellable_transport()`: its network streams wait for data in slices of
`CANCEL_POLL_S` and check the scope between them, so a call hanging at a provider fails
with `ModelError` `cancelled` within that time of the cancel, and its connection is
closed (never reused). Retry back-off sleeps stop too (`sleep`).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import httpcore
import httpx

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


class _Stream(httpcore.NetworkStream):
    """A network stream whose reads wait in slices and give up once cancelled."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if cancelled():
                raise httpcore.ReadError("cancelled")
            wait = CANCEL_POLL_S
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise httpcore.ReadTimeout("timed out")
            try:
                return self._inner.read(max_bytes, timeout=wait)
            except httpcore.ReadTimeout:
                continue  # nothing arrived in this slice (nothing was consumed)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if cancelled():
            raise httpcore.WriteError("cancelled")
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        if cancelled():
            raise httpcore.ConnectError("cancelled")
        return _Stream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def cancellable_transport() -> httpx.HTTPTransport:
    """An httpx transport (no environment: `trust_env=False`) whose connections obey the
    cancel scope. httpx does not take a network backend, so the pool's is wrapped."""
    transport = httpx.HTTPTransport(trust_env=False)
    pool = transport._pool
    pool._network_backend = _Backend(pool._network_backend)
    return transport
