"""Every named planning limit, at its edge."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from phloem.actors.planning import (
    AdapterRegistry,
    PlanningRuntime,
    adapters as adapters_mod,
    runtime as runtime_mod,
)
from phloem.actors.planning.worker import MAX_CALLBACK_OUTPUT_BYTES
from phloem.protocols import jsonvalue as jv, plan as pl
from phloem.protocols.errors import PhloemError
from phloem.supervision.refs import Owner
from tests.actors.planning.conftest import read_pids
from tests.helpers import raises_kind

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("name", sorted(pl.OPTION_RANGES))
def test_each_option_accepts_its_bounds_and_rejects_beyond(name: str) -> None:
    _, lo, hi = pl.OPTION_RANGES[name]
    assert getattr(pl.parse_options({name: lo}), name) == lo
    assert getattr(pl.parse_options({name: hi}), name) == hi
    between = rf"^invalid_planning_options: {name} must be between {lo} and {hi}$"
    for bad in (lo - 1, hi + 1):
        with pytest.raises(PhloemError, match=between) as info:
            pl.parse_options({name: bad})
        assert info.value.details == {"option": name}


def test_result_metadata_is_accepted_up_to_its_limit() -> None:
    overhead = len(jv.canonical_json({"k": ""}))
    edge = {"k": "x" * (pl.MAX_RESULT_METADATA_BYTES - overhead)}
    assert pl.parse_options({"result_metadata": edge}).result_metadata == edge
    with pytest.raises(PhloemError, match="result_metadata must be <="):
        pl.parse_options({"result_metadata": {"k": edge["k"] + "x"}})


def test_plan_documents_beyond_the_parse_limit_are_refused_unread() -> None:
    data = b" " * (pl.MAX_PLAN_DOCUMENT_BYTES + 1)
    assert raises_kind(pl.decode, data) == "plan_size_limit_exceeded"
    assert raises_kind(pl.decode, b" " * pl.MAX_PLAN_DOCUMENT_BYTES) == "invalid_plan_json"


def test_adapter_names_and_descriptors_are_bounded(runtime: PlanningRuntime, owner: Owner) -> None:
    name = "x" * (adapters_mod.MAX_ADAPTER_NAME_CHARS + 1)
    assert raises_kind(runtime.start, owner, name, "scripted", 1) == "invalid_planning_adapter"
    limit = adapters_mod.MAX_ADAPTER_DESCRIPTOR_BYTES
    overhead = len(jv.canonical_json(["", None]))
    at_edge = {"name": "scripted", "target": "x" * (limit - overhead)}
    ref = runtime.start(owner, {**at_edge, "target": "x" * 10}, "scripted", 1)
    assert runtime.await_result(owner, ref, 30).status == "failed"  # target is not a dict
    runtime.adapters.resolve("planner", at_edge)
    over = {"name": "scripted", "target": "x" * (limit - overhead + 1)}
    with pytest.raises(PhloemError) as info:
        runtime.adapters.resolve("planner", over)
    assert info.value.details == {"role": "planner", "reason": "invalid_descriptor"}


def test_adapters_per_role_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters_mod, "MAX_ADAPTERS_PER_ROLE", 2)
    spec = "tests.actors.planning.adapters:ScriptedPlanner"
    registry = AdapterRegistry.load({"a": spec, "b": spec})
    with pytest.raises(PhloemError, match="more than 2 planners"):
        registry.register("planner", "c", spec)


def test_goal_and_context_are_bounded(runtime: PlanningRuntime, owner: Owner) -> None:
    limit = runtime_mod.MAX_REQUEST_BYTES
    overhead = len(jv.canonical_json(["", {}]))
    runtime.prepare("scripted", "scripted", "x" * (limit - overhead))
    with pytest.raises(PhloemError) as info:
        runtime.prepare("scripted", "scripted", "x" * (limit - overhead + 1))
    assert info.value.kind == "invalid_planning_request"


def test_callback_output_beyond_the_limit_is_an_invalid_output(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    steps = [
        {"op": "big", "n": MAX_CALLBACK_OUTPUT_BYTES // 2},
        {"op": "big", "n": MAX_CALLBACK_OUTPUT_BYTES},
    ]
    planner = {"name": "scripted", "target": {"steps": steps}}
    result = runtime.run(owner, planner, "scripted", 1)
    first, second = (o.to_builtins() for o in result.observations)
    assert first["status"] == "ok" and len(first["output"]) == MAX_CALLBACK_OUTPUT_BYTES // 2
    assert second["error"]["kind"] == "invalid_executor_output"


def test_active_runs_are_bounded(adapters: AdapterRegistry, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_active_runs must be between 1 and 100000"):
        PlanningRuntime(adapters, max_active_runs=0)
    rt = PlanningRuntime(adapters, max_active_runs=1, name="planning-limit")
    owner = Owner.client("limit")
    try:
        fifo = str(tmp_path / "fifo")
        os.mkfifo(fifo)
        sleeper = {"name": "scripted", "target": {"steps": [{"op": "sleep", "fifo": fifo}]}}
        ref = rt.start(owner, sleeper, "scripted", 1)
        read_pids(fifo)
        assert raises_kind(rt.start, owner, "scripted", "scripted", 1) == "backpressure"
        rt.cancel(owner, ref)
        assert rt.await_result(owner, ref, 5).status == "cancelled"
        assert rt.active_runs == 0
        assert rt.run(owner, "scripted", "scripted", 1).status == "completed"
    finally:
        rt.stop()


@pytest.mark.parametrize("timeout", [-1, float("nan"), runtime_mod.MAX_AWAIT_TIMEOUT_S + 1, "1"])
def test_await_timeouts_are_validated(runtime: PlanningRuntime, owner: Owner, timeout: Any) -> None:
    ref = runtime.start(owner, "scripted", "scripted", 1)
    assert raises_kind(runtime.await_result, owner, ref, timeout) == "invalid_planning_request"
    assert runtime.await_result(owner, ref, runtime_mod.MAX_AWAIT_TIMEOUT_S).status == "completed"
