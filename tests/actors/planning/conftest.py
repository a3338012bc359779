"""Fixtures: one planning runtime with the scripted and example adapters, and owners."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Iterator

import pytest

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.actors.planning.callbacks import CallbackRunner
from phloem.supervision.refs import Owner
from tests.raycluster import assert_no_leaks, ray_backend

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


@pytest.fixture(scope="module", params=["local", "ray"])
def runtime(request: pytest.FixtureRequest, adapters: AdapterRegistry) -> Iterator[PlanningRuntime]:
    """The runtime, its callbacks on the local fork server or on a 2-node Ray cluster:
    every test that takes it runs on both backends."""
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
        backend = ray_backend("planning_callbacks")
        try:
            rt = PlanningRuntime(
                adapters,
                name="planning-test-ray",
                runner=CallbackRunner(backend.launcher("planning_callbacks")),
            )
            assert rt.run(Owner.client("warm-up"), "scripted", "scripted", 0).status == "completed"
            yield rt
            rt.stop()
        finally:
            backend.shutdown()
        assert_no_leaks()
        return
    rt = PlanningRuntime(adapters, name="planning-test")
    # warm the fork server up, so that timing tests do not pay for its start
    assert rt.run(Owner.client("warm-up"), "scripted", "scripted", 0).status == "completed"
    yield rt
    rt.stop()


@pytest.fixture
def owner() -> Owner:
    return Owner.client("test")


def read_pids(fifo: str, timeout: float = 30.0) -> list[int]:
    """Wait (without polling) for a callback child to write its pid(s) into `fifo`.

    We hold a write end of our own while we wait: a writer that opens the FIFO and dies
    before it writes (a callback child killed with its fork server) then cannot leave
    the FIFO at end-of-file, where `select` reports it ready with nothing to read.
    """
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    keep_open = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        data = b""
        deadline = time.monotonic() + timeout
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0.0))
            assert ready, "callback child did not report its pid"
            try:
                data += os.read(fd, 64)
            except BlockingIOError:  # a readiness report with nothing behind it
                continue
        return [int(p) for p in data.split()]
    finally:
        os.close(keep_open)
        os.close(fd)


def on_ray(rt: PlanningRuntime) -> bool:
    """Whether `rt` runs its callbacks on the Ray cluster."""
    return rt.runner.launcher is not None
