"""Write batches (`phloem.base.writebatch`): a connection corked by a thread's batch holds
its frames, in order with other threads' frames, and writes them together at the end."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from phloem.base import writebatch
from phloem.config import DaemonConfig
from phloem.daemon.connection import Connection
from phloem.daemon.loop import ConnectionLoop
from phloem.protocols.wire import FrameReader

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def pair() -> Iterator[tuple[Connection, socket.socket]]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    server: Any = SimpleNamespace(config=SimpleNamespace(daemon=DaemonConfig()))
    loop = ConnectionLoop()
    loop.start()
    conn = Connection(server, loop, ours, (1, 0, 0), FrameReader())
    peer.setblocking(False)
    yield conn, peer
    loop.stop(5.0)
    ours.close()
    peer.close()


def _pending(peer: socket.socket) -> bytes:
    try:
        return peer.recv(1 << 16)
    except BlockingIOError:
        return b""


def test_frames_outside_a_batch_are_written_at_once(
    pair: tuple[Connection, socket.socket],
) -> None:
    conn, peer = pair
    assert conn.send_frame(b"one")
    assert _pending(peer) == b"one"


def test_a_batch_holds_every_thread_s_frames_in_order_until_it_ends(
    pair: tuple[Connection, socket.socket],
) -> None:
    conn, peer = pair
    assert writebatch.hold()
    assert not writebatch.hold()  # one batch per thread: it goes on
    try:
        assert conn.send_frame(b"a")
        other = threading.Thread(target=conn.send_frame, args=(b"b",))  # another thread's
        other.start()
        other.join()
        assert conn.send_frame(b"c")
        assert _pending(peer) == b""  # all held
    finally:
        writebatch.release()
    assert writebatch.held() is None
    assert _pending(peer) == b"abc"  # one write, in the order they were sent
    assert conn.send_frame(b"d")  # uncorked: straight out again
    assert _pending(peer) == b"d"
