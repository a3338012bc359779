"""One `Link` on its own, against the fake server: a task of the link that fails with an
exception nothing expected (the reader or the writer) logs one line, closes the socket
with 1011 and reports `LinkDown(internal_error)` — the link never just stops."""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterator
from typing import Any

import pytest

from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.transport import (
    INTERNAL_ERROR,
    Dial,
    Link,
    LinkDown,
    LinkFrame,
    LinkOpen,
    LinkReady,
    LiveLoop,
    Outbox,
)
from phloem.protocols import live as wire

WAIT_S = 30.0


@pytest.fixture
def live_loop() -> Iterator[LiveLoop]:
    loop = LiveLoop("test-live-loop")
    yield loop
    loop.stop()


def dial(server: FakeLiveServer) -> Dial:
    setup = wire.ClientMessage(setup=wire.Setup(model="models/m"))
    return Dial(
        url=server.url + wire.ws_path("v1beta"),
        api_key=None,
        setup_frame=wire.encode_client(setup),
        connect_timeout_s=10.0,
        setup_timeout_s=10.0,
    )


def next_of(inbox: queue.Queue[Any], kind: type) -> Any:
    while True:
        message = inbox.get(timeout=WAIT_S)
        if isinstance(message, kind):
            return message
        assert not isinstance(message, LinkDown), message


def link_failures(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    """The `live_link_failed` lines logged, wherever this test process's logging sends
    them: to the `phloem` loggers (embedded, the default) or as lines on stderr (owned,
    once something in the process has called `configure_logging`)."""
    records = [r.getMessage() for r in caplog.records]
    lines = [*records, *capsys.readouterr().err.splitlines()]
    return [line for line in lines if "live_link_failed" in line]


def test_a_failing_writer_is_reported(
    server: FakeLiveServer,
    live_loop: LiveLoop,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.ERROR, logger="phloem")
    inbox: queue.Queue[Any] = queue.Queue()
    outbox = Outbox(16, 1 << 20)
    link = Link(live_loop, 1, dial(server), outbox, inbox.put)
    next_of(inbox, LinkReady)
    outbox.admit([b"\xff not UTF-8"])  # what no frame of phloem's is: the writer fails
    down = inbox.get(timeout=WAIT_S)
    assert isinstance(down, LinkDown) and down.link == 1
    assert down.reason == "internal_error"
    assert "writer failed: UnicodeDecodeError" in down.detail
    assert server.connection(0).closed.wait(WAIT_S)
    assert server.connection(0).close_code == INTERNAL_ERROR
    link.close()
    logged = link_failures(caplog, capsys)
    assert len(logged) == 1 and "writer" in logged[0]


def test_a_failing_reader_is_reported(
    server: FakeLiveServer,
    live_loop: LiveLoop,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.ERROR, logger="phloem")
    inbox: queue.Queue[Any] = queue.Queue()

    def post(message: Any) -> None:
        if isinstance(message, LinkFrame):  # a session that cannot take a frame: a bug
            raise LookupError("no such session slot")
        inbox.put(message)

    link = Link(live_loop, 7, dial(server), Outbox(16, 1 << 20), post)
    assert isinstance(inbox.get(timeout=WAIT_S), LinkOpen)
    next_of(inbox, LinkReady)
    server.inject({"serverContent": {"turnComplete": True}})
    down = inbox.get(timeout=WAIT_S)
    assert isinstance(down, LinkDown) and down.link == 7
    assert down.reason == "internal_error"
    assert "reader failed: LookupError" in down.detail
    assert server.connection(0).closed.wait(WAIT_S)
    assert server.connection(0).close_code == INTERNAL_ERROR
    link.close()
    logged = link_failures(caplog, capsys)
    assert len(logged) == 1 and "reader" in logged[0]


def test_a_clean_loss_is_still_transport_lost(server: FakeLiveServer, live_loop: LiveLoop) -> None:
    inbox: queue.Queue[Any] = queue.Queue()
    link = Link(live_loop, 2, dial(server), Outbox(16, 1 << 20), inbox.put)
    next_of(inbox, LinkReady)
    server.drop(0)
    down = inbox.get(timeout=WAIT_S)
    assert isinstance(down, LinkDown) and down.reason == "transport_lost"
    link.close()
