"""An embedded tree's children by path and its log lines, at their limits: at most
`MAX_CONTROL_CALLS` controls in flight (one more is `backpressure`), a `logs` reply of at
most `MAX_LOG_REPLY_BYTES` of line text (the newest lines), and followers whose reader
left are let go."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import pytest

import phloem
from phloem.actors.services import ServiceActor
from phloem.base import logs
from phloem.base.logbuffer import LogBuffer
from phloem.config import parse_config
from phloem.protocols.errors import ErrorValue
from phloem.supervision.refs import Owner
from phloem.tree import MAX_CONTROL_CALLS, MAX_LOG_REPLY_BYTES

pytestmark = pytest.mark.timeout(120)

GATE = threading.Event()
GATE_WAIT_S = 60.0


class GatedStop(ServiceActor):
    """Stops only once `GATE` is set (a service flushing its work for as long as it takes)."""

    def on_stop(self) -> None:
        GATE.wait(GATE_WAIT_S)
        super().on_stop()


CONFIG = '[services.extra]\ngated = "tests.test_tree_control:GatedStop"\n'


def test_control_calls_in_flight_at_the_limit_and_one_over() -> None:
    GATE.clear()
    with phloem.Tree.start(parse_config(CONFIG)) as tree:
        outcomes: queue.Queue[tuple[bool, object]] = queue.Queue()
        for _ in range(MAX_CONTROL_CALLS):  # the first stop holds the supervisor at the gate
            tree.control("stop", "gated", 90.0, outcomes.put)
        refused: list[tuple[bool, object]] = []
        tree.control("stop", "gated", 90.0, refused.append)
        GATE.set()
        results = [outcomes.get(timeout=90) for _ in range(MAX_CONTROL_CALLS)]
        [(ok, error)] = refused
        assert not ok and isinstance(error, ErrorValue) and error.kind == "backpressure"
        kinds = sorted("ok" if ok else value.kind for ok, value in results)  # type: ignore[attr-defined]
        assert kinds == ["not_running"] * (MAX_CONTROL_CALLS - 1) + ["ok"]
        assert tree.control_now("start", "gated").state == "running"  # a place is free again


@pytest.fixture
def buffer() -> Iterator[LogBuffer]:
    kept = LogBuffer()
    logs.keep_recent(kept)
    try:
        yield kept
    finally:
        logs.keep_recent(None)


LINE = "x" * 1024


def test_a_logs_reply_at_the_byte_limit_and_one_over(buffer: LogBuffer) -> None:
    lines = MAX_LOG_REPLY_BYTES // len(LINE)
    for i in range(lines):
        buffer.add(f"big/{i // buffer.lines_per_child}", "info", "e", float(i), LINE)
    with phloem.Tree.start() as tree:
        owner = Owner.client("test")
        at_limit = tree.logs(owner, "big")
        assert (len(at_limit.lines), at_limit.omitted) == (lines, 0)
        buffer.add("big/last", "info", "newest", 1e9, LINE)
        over = tree.logs(owner, "big")
        assert (len(over.lines), over.omitted) == (lines, 1)
        assert over.lines[-1].event == "newest" and over.lines[0].at == 1.0  # the oldest left


def test_a_follower_whose_reader_left_is_let_go(buffer: LogBuffer) -> None:
    with phloem.Tree.start() as tree, tree.client() as client:
        reply, stream = client.follow_logs("pair")
        assert reply.lines == [] and reply.stream is not None
        buffer.add("pairs/x", "info", "not-below", 1.0, "{}")
        buffer.add("pair/a", "info", "below", 2.0, "{}")
        assert stream.recv(30).event == "below"
        stream.close()
        _, again = client.follow_logs("pair")
        with again:
            assert len(tree._follows) == 1  # the first follower was let go
    assert buffer.lines("pair/a")[0].event == "below"
