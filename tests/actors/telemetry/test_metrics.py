"""phloem's own metrics: supervisor restarts, process children started and killed by
reason, runs by outcome — all through the SDK's MeterProvider, exported at shutdown."""

from __future__ import annotations

import time

import msgspec
import pytest

import phloem
from phloem.agents import FunctionAgent
from phloem.config import Config
from phloem.supervision import Supervisor, SupervisorSpec
from phloem.supervision.childcall import ChildCallError, call_in_child
from tests.supervision.conftest import Recorder
from tests.supervision.test_supervisor import _crash_and_wait, _workers

from .receiver import Receiver

pytestmark = pytest.mark.timeout(60)


def _double(x: int) -> int:
    return 2 * x


def _boom() -> None:
    raise RuntimeError("boom")


def _hang(x: int) -> int:
    time.sleep(60)
    return x


def test_restarts_children_and_runs_are_counted(receiver: Receiver) -> None:
    cfg = msgspec.convert(
        {"telemetry": {"enabled": True, "endpoint": receiver.endpoint, "metric_interval_s": 3600}},
        Config,
    )
    with phloem.Tree.start(cfg) as tree:
        sup = Supervisor.start(SupervisorSpec(), _workers(Recorder(), "ab"), name="metered")
        try:
            _crash_and_wait(sup, "b")
        finally:
            sup.stop()
        assert call_in_child(_double, 21, name="metered-ok", timeout=20) == 42
        with pytest.raises(ChildCallError) as info:
            call_in_child(_hang, 1, name="metered-hang", timeout=3.0)
        assert info.value.kind == "child_timeout"
        assert tree.run_agent(FunctionAgent("fine", "", lambda: "ok")).ok
        assert not tree.run_agent(FunctionAgent("boom", "", _boom)).ok
    restarts = receiver.latest_points("phloem.supervisor.restarts")
    assert any(p.attributes == {"supervisor": "metered"} and p.value == 1 for p in restarts)
    started = receiver.latest_points("phloem.process.started")
    # the hanging child may be killed before it is ready on a loaded machine: ≥ 1
    assert started and started[0].value >= 1
    killed = {
        p.attributes["reason"]: p.value for p in receiver.latest_points("phloem.process.killed")
    }
    assert killed.get("killed", 0) + killed.get("timeout", 0) >= 1
    runs = {p.attributes["outcome"]: p.value for p in receiver.latest_points("phloem.runs")}
    assert runs == {"done": 1, "agent_failed": 1}
