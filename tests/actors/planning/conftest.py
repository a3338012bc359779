"""Fixtures: one planning runtime with the scripted and example adapters, and owners."""

from __future__ import annotations

import os
import select
from collections.abc import Iterator

import pytest

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.supervision import forkserver
from phloem.supervision.refs import Owner

PLANNERS = {
    "scripted": "tests.actors.planning.adapters:ScriptedPlanner",
    "report": "phloem.examples.planning_report:ReportPlanner",
}
EXECUTORS = {
    "scripted": "tests.actors.planning.adapters:ScriptedExecutor",
    "readonly_tools": "phloem.examples.planning_report:ReadOnlyToolsExecutor",
}


@pytest.fixture(scope="module")
def adapters() -> AdapterRegistry:
    return AdapterRegistry.load(PLANNERS, EXECUTORS)


@pytest.fixture(scope="module")
def runtime(adapters: AdapterRegistry) -> Iterator[PlanningRuntime]:
    before = forkserver.preloaded()
    rt = PlanningRuntime(adapters, name="planning-test")
    if forkserver.preloaded() != before and forkserver.server_pid() is not None:
        # An earlier test module started the fork server without the planning modules;
        # without them every callback child would import (and compile) them anew.
        forkserver.shutdown_server()
    # warm the fork server up, so that timing tests do not pay for its start
    assert rt.run(Owner.client("warm-up"), "scripted", "scripted", 0).status == "completed"
    yield rt
    rt.stop()


@pytest.fixture
def owner() -> Owner:
    return Owner.client("test")


def read_pids(fifo: str, timeout: float = 10.0) -> list[int]:
    """Wait (without polling) for a callback child to write its pid(s) into `fifo`."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        data = b""
        while not data.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, "callback child did not report its pid"
            chunk = os.read(fd, 64)
            if chunk:
                data += chunk
        return [int(p) for p in data.split()]
    finally:
        os.close(fd)
