"""A fork server that dies under a planning run costs only the callbacks it held: a
planner callback lost with it is asked again once (an executor's is not: see
test_runtime's `test_losing_the_fork_server_mid_callback_is_an_observation...`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.protocols.result import PlanningResult
from phloem.supervision.forkserver import server_pid
from phloem.supervision.refs import Owner
from tests.actors.planning.conftest import read_pids

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def local_runtime(adapters: AdapterRegistry) -> Iterator[PlanningRuntime]:
    rt = PlanningRuntime(adapters, name="planning-server-loss")
    assert rt.run(Owner.client("warm-up"), "scripted", "scripted", 0).status == "completed"
    yield rt
    rt.stop()


def _kill_server_under(fifo: str) -> None:
    """Wait for the callback child to report, then SIGKILL its fork server."""
    [pid] = read_pids(fifo)
    server = server_pid()
    assert server is not None
    with open(f"/proc/{pid}/stat", "rb") as f:
        assert int(f.read().rsplit(b")", 1)[1].split()[1]) == server, "not the server's child"
    os.kill(server, signal.SIGKILL)


def _run(rt: PlanningRuntime, planner: dict[str, Any], kills: int, fifo: str) -> PlanningResult:
    owner = Owner.client("server-loss")
    ref = rt.start(owner, {"name": "scripted", "target": planner}, "scripted", {"task": "t"})
    for _ in range(kills):
        _kill_server_under(fifo)
    return rt.await_result(owner, ref, 60)


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = str(tmp_path / "fifo")
    os.mkfifo(path)
    return path


def test_a_planner_callback_lost_with_its_fork_server_is_asked_again_and_the_run_completes(
    local_runtime: PlanningRuntime, fifo: str, tmp_path: Path
) -> None:
    flag = tmp_path / "asked"
    planner = {"plan": "report_and_sleep", "flag": str(flag), "fifo": fifo}
    result = _run(local_runtime, planner, 1, fifo)
    assert result.status == "completed", result.error
    assert flag.exists() and result.steps_executed == 1


def test_a_planner_callback_is_asked_again_once_only(
    local_runtime: PlanningRuntime, fifo: str, tmp_path: Path
) -> None:
    asks = tmp_path / "asks"
    planner = {"plan": "report_and_sleep", "fifo": fifo, "asks": str(asks)}
    result = _run(local_runtime, planner, 2, fifo)
    assert len(asks.read_text().split()) == 2, "asked twice in all: once, and once again"
    assert result.error is not None
    assert result.error.to_builtins() == {
        "kind": "planner_callback_failed",
        "reason": "callback_server_lost",
    }
