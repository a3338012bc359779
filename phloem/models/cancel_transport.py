"""The HTTP transport of our providers' clients that obeys the cancel scope
(`phloem.models.cancel`): its network streams wait for data in slices of `CANCEL_POLL_S`
and check the scope between them, so a call hanging at a provider ends within that time
of the cancel and its connection is closed. Its own module because it stands on httpx
and httpcore, which only a process that makes a model call needs to load."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from phloem.models.cancel import CANCEL_POLL_S, cancelled


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
