"""The daemon's ring buffer of recent log lines (`phloem.base.logbuffer`): each of its
limits at its edge (exactly at it, one over), followers that fail or log themselves, and
lines attributed to the actor whose thread made them."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from phloem.base import logs
from phloem.base.logbuffer import (
    MAX_LOG_CHILDREN,
    MAX_LOG_FOLLOWERS,
    MAX_LOG_LINE_BYTES,
    MAX_LOG_LINES_PER_CHILD,
    LogBuffer,
    TooManyFollowers,
    cut_line,
    matches,
)
from phloem.protocols.logs import LogLine
from phloem.supervision.actor import Actor
from phloem.supervision.spec import ChildSpec, SupervisorChild, SupervisorSpec
from phloem.supervision.supervisor import Supervisor

pytestmark = pytest.mark.timeout(30)


def fill(buffer: LogBuffer, actor: str, n: int) -> None:
    for i in range(n):
        buffer.add(actor, "info", f"e{i}", float(i), json.dumps({"i": i}))


def test_lines_per_child_at_the_limit_and_one_over() -> None:
    buffer = LogBuffer()
    fill(buffer, "a", MAX_LOG_LINES_PER_CHILD)
    assert len(buffer.lines("a")) == MAX_LOG_LINES_PER_CHILD
    fill(buffer, "b", MAX_LOG_LINES_PER_CHILD + 1)
    kept = buffer.lines("b")
    assert len(kept) == MAX_LOG_LINES_PER_CHILD and kept[0].event == "e1"  # the oldest went
    assert len(buffer.lines("a")) == MAX_LOG_LINES_PER_CHILD  # per child: a keeps its own


def test_bytes_per_line_at_the_limit_and_one_over() -> None:
    assert cut_line("x" * MAX_LOG_LINE_BYTES) == ("x" * MAX_LOG_LINE_BYTES, 0)
    assert cut_line("x" * (MAX_LOG_LINE_BYTES + 1)) == ("x" * MAX_LOG_LINE_BYTES, 1)
    text, cut = cut_line("x" * (MAX_LOG_LINE_BYTES - 1) + "é")  # é is two bytes
    assert (text, cut) == ("x" * (MAX_LOG_LINE_BYTES - 1), 2)  # never half a character
    buffer = LogBuffer()
    line = buffer.add("a", "info", "big", 0.0, "y" * (MAX_LOG_LINE_BYTES + 10))
    assert (len(line.line), line.cut) == (MAX_LOG_LINE_BYTES, 10)


def test_children_kept_at_the_limit_and_one_over_drops_the_least_recent() -> None:
    buffer = LogBuffer()
    for i in range(MAX_LOG_CHILDREN):
        fill(buffer, f"c{i}", 1)
    assert len(buffer.children()) == MAX_LOG_CHILDREN and buffer.children_dropped == 0
    fill(buffer, "c0", 1)  # c0 logs again: c1 is now the least recent
    fill(buffer, "new", 1)
    children = buffer.children()
    assert len(children) == MAX_LOG_CHILDREN and buffer.children_dropped == 1
    assert "c1" not in children and "c0" in children and children[-1] == "new"


def test_followers_at_the_limit_and_one_over() -> None:
    buffer = LogBuffer()
    told: list[LogLine] = []
    stops = [buffer.follow(told.append) for _ in range(MAX_LOG_FOLLOWERS)]
    with pytest.raises(TooManyFollowers):
        buffer.follow(told.append)
    fill(buffer, "a", 1)
    assert len(told) == MAX_LOG_FOLLOWERS
    stops[0]()
    buffer.follow(told.append)  # a place is free again


def test_a_follower_that_fails_or_logs_never_harms_the_logger() -> None:
    buffer = LogBuffer()

    def fails(line: LogLine) -> None:
        raise RuntimeError("follower broke")

    told: list[str] = []

    def logs_too(line: LogLine) -> None:
        told.append(line.event)
        buffer.add("follower", "info", "echoed", 0.0, "{}")  # kept, not told again

    buffer.follow(fails)
    buffer.follow(logs_too)
    fill(buffer, "a", 2)
    assert told == ["e0", "e1"]
    assert [x.event for x in buffer.lines("follower")] == ["echoed", "echoed"]


def test_lines_of_a_path_since_a_time_and_within_a_byte_budget() -> None:
    buffer = LogBuffer()
    for actor in ("pair", "pair/first", "pairs/x", "other"):
        buffer.add(actor, "info", actor, 10.0, "1234567890")
    assert [x.actor for x in buffer.lines("pair")] == ["pair", "pair/first"]
    assert len(buffer.lines("")) == 4 and matches("a/b", "") and not matches("pairs", "pair")
    assert buffer.lines("pair", since=10.0) and not buffer.lines("pair", since=10.5)
    assert [x.actor for x in buffer.lines("", max_bytes=20)] == ["pairs/x", "other"]  # exactly
    assert [x.actor for x in buffer.lines("", max_bytes=19)] == ["other"]  # one under


class Talker(Actor):
    def on_receive(self, message: Any) -> Any:
        logs.get_logger("tests.talker").info("talked", what=message)
        return "ok"


@pytest.fixture
def kept() -> Iterator[tuple[LogBuffer, io.StringIO]]:
    out = io.StringIO()
    buffer = LogBuffer()
    logs.configure_logging("info", "json", out)
    logs.keep_recent(buffer)
    try:
        yield buffer, out
    finally:
        logs.keep_recent(None)
        logs.configure_logging("warning", "console")


def test_a_record_made_on_an_actor_is_kept_for_its_tree_path(
    kept: tuple[LogBuffer, io.StringIO],
) -> None:
    buffer, out = kept
    inner = SupervisorChild(SupervisorSpec(), [ChildSpec("talker", Talker)])
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("group", inner)], name="root")
    try:
        [group] = [c.ref for c in sup.which_children()]
        [talker] = [c.ref for c in group.which_children()]
        assert talker.ask("hello", timeout=10) == "ok"
        logs.get_logger("tests.talker").info("outside")
    finally:
        sup.stop()
    [line] = [x for x in buffer.lines() if x.event == "talked"]
    assert (line.actor, line.level, json.loads(line.line)["what"]) == (
        "group/talker",
        "info",
        "hello",
    )
    assert buffer.lines("group") == [line]
    [outside] = [x for x in buffer.lines() if x.event == "outside"]
    assert outside.actor == ""  # made on no actor's thread
    written = [json.loads(x) for x in out.getvalue().splitlines()]
    assert {"event": "talked", "actor_path": "group/talker"}.items() <= next(
        w for w in written if w["event"] == "talked"
    ).items()
