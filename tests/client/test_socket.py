"""Connecting to a daemon that is slow to accept: both clients wait for room in its
listen backlog, within their connect timeout."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.client.aio import AsyncClient
from phloem.client.socket import SocketTransport
from phloem.protocols.errors import PhloemError

pytestmark = pytest.mark.timeout(30)

MAX_FILLERS = 1_000  # far above any listen backlog a test sets


@contextlib.contextmanager
def full_backlog(path: Path) -> Iterator[None]:
    """A listening socket that never accepts, its backlog filled with connections."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(0)
    fillers: list[socket.socket] = []
    try:
        for _ in range(MAX_FILLERS):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            fillers.append(s)
            try:
                s.connect(str(path))
            except BlockingIOError:
                break  # the backlog is full
        else:
            pytest.fail("the listen backlog never filled")
        yield
    finally:
        for s in fillers:
            s.close()
        server.close()


def test_a_full_backlog_is_waited_for_and_then_a_timeout(tmp_short: Path) -> None:
    """A daemon too busy to accept gets the connect timeout to make room; the connect
    ends `timeout`, not at once with `connection_lost` (EAGAIN)."""
    path = tmp_short / "busy.sock"
    with full_backlog(path), pytest.raises(PhloemError) as info:
        SocketTransport.connect(path, timeout=0.3)
    assert info.value.kind == "timeout" and str(path) in info.value.message


def test_the_asyncio_client_waits_for_room_too(tmp_short: Path) -> None:
    """Not `connection_lost` from a socket asyncio took for connected after EAGAIN."""
    path = tmp_short / "busy.sock"

    async def main() -> str:
        with pytest.raises(PhloemError) as info:
            await AsyncClient.connect(path, timeout=0.3)
        return info.value.kind

    with full_backlog(path):
        assert asyncio.run(main()) == "timeout"


def test_no_daemon_and_a_path_that_is_not_a_socket(tmp_short: Path) -> None:
    for path in (tmp_short / "missing.sock", tmp_short / "no" / "dir.sock"):
        with pytest.raises(PhloemError) as info:
            SocketTransport.connect(path, timeout=1)
        assert info.value.kind == "no_daemon" and str(path) in info.value.message
