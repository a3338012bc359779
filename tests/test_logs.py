"""Logging never raises into its caller: a dead sink drops lines and counts them."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator

import pytest
import structlog

from phloem import logs

pytestmark = pytest.mark.timeout(20)


class _Dead(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    logs.configure_logging("warning", "console")


def test_a_sink_that_raises_drops_the_line_and_counts_it() -> None:
    logs.configure_logging("info", "json", _Dead())
    before = logs.dropped_lines()
    log = structlog.get_logger("test")
    log.info("one", n=1)
    log.warning("two")
    assert logs.dropped_lines() == before + 2


def test_a_stderr_pipe_whose_reader_is_gone_never_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    dead = open(write_end, "w", buffering=1)  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", dead)
    logs.configure_logging("info", "json")
    before = logs.dropped_lines()
    structlog.get_logger("test").info("stop_requested", owner="o1")
    assert logs.dropped_lines() == before + 1
    good = io.StringIO()
    monkeypatch.setattr(sys, "stderr", good)  # a working sink again: lines flow
    structlog.get_logger("test").info("back")
    assert '"back"' in good.getvalue() and logs.dropped_lines() == before + 1
    with contextlib.suppress(OSError):
        dead.close()
