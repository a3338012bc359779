"""Fixtures: every supervisor a test starts is stopped after it; the supervision
semantics' tests run on both actor kinds (pykka threads and light actors)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from phloem.supervision import light, root_supervisors

LIGHT_MODULES = frozenset(
    {
        "test_actor",
        "test_supervisor",
        "test_monitor",
        "test_refs",
        "test_credit",
        "test_owners",
        "test_control",
        "test_leaks",
    }
)
"""Modules whose tests run on both kinds, unchanged: the light kind's acceptance
(test_snapshot asserts every actor's thread name, which a light actor has none of)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.rsplit(".", 1)[-1] in LIGHT_MODULES:
        metafunc.parametrize("actor_kind", list(light.KINDS))


@pytest.fixture
def actor_kind() -> str:
    return "thread"


@pytest.fixture(autouse=True)
def _default_actor_kind(actor_kind: str) -> Iterator[None]:
    """Actors whose class does not choose a kind run as `actor_kind`."""
    old = light.set_default_kind(actor_kind)
    try:
        yield
    finally:
        light.set_default_kind(old)


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
