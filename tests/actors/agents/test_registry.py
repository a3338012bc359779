"""Agents from the `[agents]` config: trusted names only, loud errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from phloem import PhloemError
from phloem.agents import FunctionAgent, PlannerAgent
from phloem.agents.catalogue import build_catalogue, planned_groups
from phloem.agents.settings import AgentsConfig
from phloem.base.settings import load_component

pytestmark = pytest.mark.timeout(30)

EX = "phloem.examples.supplier_risk"


def registry(**sections: Any) -> Any:
    cfg = msgspec.convert(sections, AgentsConfig)
    return build_catalogue(cfg, lambda path: load_component(path, what="agent")).registry


FUNCS = {
    "news": {"fn": f"{EX}:fetch_news", "input_keys": ["company"], "output_key": "news"},
    "files": {"fn": f"{EX}:fetch_filings", "input_keys": ["company"], "output_key": "filings"},
}


def test_function_agents_and_planners_are_built_by_name() -> None:
    reg = registry(
        functions=FUNCS,
        planners={
            "both": {"planner": "parallel", "sub_agents": ["news", "files"]},
            "outer": {"planner": "sequential", "sub_agents": ["both", "news"]},
            "goal": {"planner": "goal_oriented", "sub_agents": ["news", "files"], "goal": "news"},
            "loop": {"planner": "loop", "sub_agents": ["news"], "max_cycles": 2},
            "peers": {"planner": "p2p", "sub_agents": ["news", "files"]},
        },
    )
    assert reg.names() == ["both", "files", "goal", "loop", "news", "outer", "peers"]
    assert isinstance(reg.get("news"), FunctionAgent)
    outer = reg.get("outer")
    assert isinstance(outer, PlannerAgent) and outer.sub_agents[0] is reg.get("both")
    assert planned_groups(reg.get("both"), {}) == [["news", "files"]]
    assert planned_groups(reg.get("goal"), {"company": "x"}) == [["news"]]
    with pytest.raises(PhloemError) as info:
        planned_groups(reg.get("peers"), {})
    assert info.value.kind == "plan_unavailable"
    with pytest.raises(PhloemError) as missing:
        reg.get("nobody")
    assert missing.value.kind == "unknown_agent"


@pytest.mark.parametrize(
    ("planners", "message"),
    [
        ({"p": {"planner": "sequential", "sub_agents": ["ghost"]}}, "unknown sub-agent 'ghost'"),
        (
            {
                "a": {"planner": "sequential", "sub_agents": ["b"]},
                "b": {"planner": "sequential", "sub_agents": ["a"]},
            },
            "sub_agents form a cycle",
        ),
        ({"p": {"planner": "goal_oriented", "sub_agents": ["news"]}}, "needs a goal"),
        (
            {"p": {"planner": "goal_oriented", "sub_agents": ["news", "x"], "goal": "news"}},
            "no contract for sub-agent 'x'",
        ),
    ],
)
def test_bad_planner_declarations_are_config_errors(planners: Any, message: str) -> None:
    functions = dict(FUNCS)
    functions["x"] = {"fn": f"{EX}:write_brief"}
    with pytest.raises(PhloemError, match=message) as info:
        registry(functions=functions, planners=planners)
    assert info.value.kind == "config_invalid"


def test_a_function_path_that_does_not_load_is_a_config_error() -> None:
    with pytest.raises(PhloemError) as info:
        registry(functions={"f": {"fn": f"{EX}:nope"}})
    assert info.value.kind == "config_invalid"


def test_a_function_module_that_raises_on_import_names_the_agent_module_and_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "raising_agent_mod.py").write_text("raise RuntimeError('no luck')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PhloemError) as info:
        registry(functions={"summarise": {"fn": "raising_agent_mod:summarise"}})
    assert info.value.kind == "config_invalid"
    assert info.value.message == (
        "agents.functions.summarise.fn: cannot load agent 'raising_agent_mod:summarise': "
        "RuntimeError: no luck"
    )
    with pytest.raises(PhloemError) as info:
        registry(components={"helper": "raising_agent_mod:helper"})
    assert info.value.message.startswith("agents.components.helper: cannot load agent ")


def test_unknown_keys_and_bad_values_are_rejected_by_the_schema() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"planners": {"p": {"planner": "magic", "sub_agents": []}}}, AgentsConfig)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"functions": {"f": {"fn": "os:system", "shell": True}}}, AgentsConfig)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"max_concurrent_runs": 0}, AgentsConfig)


def test_llm_agents_and_a_supervisor_use_configured_providers_lazily() -> None:
    from phloem.agents import run_agent
    from phloem.models import ScriptedModel

    model = ScriptedModel(["writer", "Once upon a time.", "DONE: written"])
    asked: list[str] = []

    def models(name: str) -> Any:
        asked.append(name)
        return model

    cfg = msgspec.convert(
        {
            "llm": {
                "writer": {"provider": "flash", "instruction": "Write.", "output_key": "story"}
            },
            "planners": {
                "lead": {"planner": "supervisor", "provider": "flash", "sub_agents": ["writer"]}
            },
        },
        AgentsConfig,
    )
    reg = build_catalogue(cfg, load_component, models).registry
    assert asked == []  # nothing resolved before the first call
    run = run_agent(reg.get("lead"), input="a story")
    assert run.outcome.status == "done_with_result" and run.outcome.result == "written"
    assert run.state["story"] == "Once upon a time."
    assert asked == ["flash", "flash", "flash"]


def test_an_unknown_provider_fails_the_call_not_the_start() -> None:
    from phloem.agents import run_agent

    cfg = msgspec.convert(
        {
            "planners": {
                "lead": {"planner": "supervisor", "provider": "nope", "sub_agents": ["w"]}
            },
            "llm": {"w": {"provider": "nope"}},
        },
        AgentsConfig,
    )
    reg = build_catalogue(cfg, load_component).registry
    run = run_agent(reg.get("lead"))
    assert run.outcome.status == "model_failed"
    assert "no provider named 'nope'" in run.outcome.message
