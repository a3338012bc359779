"""Fixtures: every supervisor a test starts is stopped after it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from phloem.supervision import root_supervisors


@pytest.fixture(autouse=True)
def _stop_supervisors() -> Iterator[None]:
    yield
    for sup in root_supervisors():
        sup.stop(10.0)


class Recorder:
    """A thread-safe event log with waiting, for ordering assertions without sleeps."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.events: list[str] = []

    def add(self, event: str) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait_for(self, predicate: object, timeout: float = 10.0) -> list[str]:
        assert callable(predicate)
        with self._cond:
            ok = self._cond.wait_for(lambda: predicate(self.events), timeout)
            assert ok, f"timed out; events so far: {self.events}"
            return list(self.events)

    def wait_count(self, event: str, count: int, timeout: float = 10.0) -> list[str]:
        return self.wait_for(lambda ev: ev.count(event) >= count, timeout)
