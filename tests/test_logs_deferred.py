"""`Logger.error_later`: the line the log thread writes is the line `error` writes, in
record order, bounded (`MAX_DEFERRED_LINES`, drops counted on a `log_lines_dropped` line) and
written at exit."""

from __future__ import annotations

import contextvars
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from phloem.base import logs
from phloem.supervision.owners import set_current_actor

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    logs.configure_logging("warning", "console")


def _lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_deferred_line_is_the_line_error_writes_with_the_context_of_its_caller() -> None:
    out = io.StringIO()
    logs.configure_logging("info", "json", out)
    log = logs.get_logger("test")
    actor: Any = SimpleNamespace(name="worker", _parent=None)

    def on_the_actor() -> None:
        set_current_actor(actor)
        log.error("crashed", reason="exception: RuntimeError: boom", n=1)
        log.error_later("crashed", reason="exception: RuntimeError: boom", n=1)

    contextvars.copy_context().run(on_the_actor)
    logs.flush_logs()
    now, later = _lines(out)
    assert later.pop("timestamp").endswith("Z") and now.pop("timestamp").endswith("Z")
    assert later == now
    assert now["actor_path"] == "worker" and list(later) == list(now)  # same fields, order


def test_deferred_lines_keep_their_order_with_the_lines_around_them() -> None:
    out = io.StringIO()
    logs.configure_logging("info", "json", out)
    log = logs.get_logger("test")
    with logs._order:  # the log thread waits: what follows must not overtake the queue
        log.error_later("first")
        log.error_later("second")
        log.info("third")  # synchronous: writes what is queued first
        log.error_later("fourth")
    logs.flush_logs()
    assert [line["event"] for line in _lines(out)] == ["first", "second", "third", "fourth"]


def test_at_the_limit_and_one_over_the_drops_are_counted_on_one_line() -> None:
    out = io.StringIO()
    logs.configure_logging("info", "json", out)
    log = logs.get_logger("test")
    before = logs.dropped_lines()
    with logs._order:
        for n in range(logs.MAX_DEFERRED_LINES):
            log.error_later("queued", n=n)
        assert logs.dropped_lines() == before  # at the limit: every record queued
        for _ in range(3):
            log.error_later("over")
        assert len(logs._pending) == logs.MAX_DEFERRED_LINES + 1  # one line says how many
    logs.flush_logs()
    lines = _lines(out)
    assert logs.dropped_lines() == before + 3
    assert [line["n"] for line in lines[:-1]] == list(range(logs.MAX_DEFERRED_LINES))
    assert lines[-1]["event"] == logs.DROPPED_EVENT
    assert (lines[-1]["count"], lines[-1]["limit"]) == (3, logs.MAX_DEFERRED_LINES)
    log.error_later("after")  # a new count starts after the line
    logs.flush_logs()
    assert _lines(out)[-1]["event"] == "after"


def test_queued_lines_are_written_at_exit() -> None:
    program = (
        "from phloem.base import logs\n"
        "logs.configure_logging('error', 'json')\n"
        "logs._order.acquire()\n"  # the log thread cannot write: the exit must
        "for n in range(100): logs.get_logger('test').error_later('queued', n=n)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=20, check=True
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [line["n"] for line in lines] == list(range(100))


def test_embedded_a_deferred_record_is_an_error_record(caplog: pytest.LogCaptureFixture) -> None:
    logs.use_stdlib()
    with caplog.at_level("ERROR", logger="phloem"):
        logs.get_logger("test").error_later("crashed", n=1)
    assert [r.getMessage() for r in caplog.records] == ["crashed n=1"]
