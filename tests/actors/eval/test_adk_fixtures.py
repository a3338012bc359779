"""ADK's eval files exactly as ADK writes them: the fixtures in `adk_fixtures/` were
written by google-adk 2.13.0's own pydantic models (`generate.py`, not run here) with
and without `exclude_none` and in camelCase; `adk_fixtures/samples/` holds files in the
shape of ADK's samples (a user simulator config, conversation scenarios). Every one is
read and run unchanged; what phloem does not implement is named, never passed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from phloem import Tree
from phloem.config import Config
from phloem.protocols.evalcriteria import read_criteria
from phloem.protocols.evalset import read_evalset
from tests.actors.eval.fixtures import home_agent

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parent / "adk_fixtures"
DUMPS = ("", ".exclude_none", ".camel")
SETS = [HERE / f"home{d}.evalset.json" for d in DUMPS]
CONFIGS = [HERE / f"test_config{d}.json" for d in DUMPS]
NOT_IMPLEMENTED = {
    "user_simulator_config",  # from test_config.json
    "final_response_match_v2",  # LLM-judged
    "safety_v1",
    "conversation_scenario",  # from the eval set
    "rubrics",
    "final_session_state",
}


@pytest.fixture(scope="module")
def tree() -> Iterator[Tree]:
    with Tree.start(msgspec.convert({"services": {"disabled": ["echo"]}}, Config)) as t:
        t.register_agent(home_agent())
        yield t


def test_the_fixtures_are_adk_dumps_with_nulls_and_camel_case() -> None:
    full, lean, camel = (json.loads(p.read_text()) for p in SETS)
    part = full["eval_cases"][0]["conversation"][0]["user_content"]["parts"][0]
    assert part["function_call"] is None and part["text"] == "Turn on the lamp"  # nulls
    assert (
        "function_call" not in lean["eval_cases"][0]["conversation"][0]["user_content"]["parts"][0]
    )
    # ADK's EvalSet has no camelCase aliases; its cases and invocations do
    assert "eval_set_id" in camel and "evalId" in camel["eval_cases"][0]
    assert "userContent" in camel["eval_cases"][0]["conversation"][0]
    config = json.loads(CONFIGS[0].read_text())
    assert config["custom_metrics"] is None and config["user_simulator_config"]["type"]
    assert config["criteria"]["tool_trajectory_avg_score"]["match_type"] == 1  # the enum value


def test_every_dump_reads_to_the_same_eval_set_and_criteria() -> None:
    sets = [read_evalset(p) for p in SETS]
    assert sets[0] == sets[1] == sets[2]
    got = sets[0]
    assert [c.id for c in got.cases] == ["turn_on_lamp", "fan_then_heater", "simulated_user"]
    lamp, fan_heater, scenario = got.cases
    assert lamp.session_input is not None and lamp.session_input.session_id == "fixed-1"
    heater = fan_heater.turns[1]  # intermediate_data as InvocationEvents
    assert [(c.name, c.args) for c in heater.expected_trajectory or []] == [
        ("set_device", {"device": "heater", "on": False})
    ]
    assert scenario.turns == [] and scenario.unsupported == ["conversation_scenario"]
    assert fan_heater.unsupported == ["final_session_state", "rubrics"]
    criteria = [read_criteria(p) for p in CONFIGS]
    assert criteria[0] == criteria[1] == criteria[2]
    trajectory = criteria[0].criteria[0]
    assert (trajectory.id, trajectory.match, trajectory.args) == (
        "tool_trajectory_avg_score",
        "in_order",
        "exact",
    )
    assert criteria[0].not_evaluated == [
        "user_simulator_config",
        "final_response_match_v2",
        "safety_v1",
    ]


@pytest.mark.parametrize("evalset", SETS, ids=lambda p: p.name)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_adk_written_files_run_unchanged(tree: Tree, evalset: Path, config: Path) -> None:
    with tree.client() as client:
        report = client.run_eval(evalset, agent="home", criteria=config)
    assert report.status == "passed", report
    by_id = {c.id: c for c in report.cases}
    assert by_id["turn_on_lamp"].status == "passed"
    assert by_id["fan_then_heater"].status == "passed"
    assert by_id["simulated_user"].status == "not_evaluated"  # never a pass
    assert report.counts["passed"] == 2 and report.pass_rate == 1.0
    assert set(report.not_evaluated) >= NOT_IMPLEMENTED
    assert len(report.not_evaluated) == len(set(report.not_evaluated))  # each named once


def test_adk_sample_shaped_files_run_and_nothing_unimplemented_passes(tree: Tree) -> None:
    path = HERE / "samples" / "scenarios.evalset.json"  # its test_config.json is beside it
    with tree.client() as client:
        report = client.run_eval(path, agent="home")
    assert [c.status for c in report.cases] == ["not_evaluated", "not_evaluated"]
    assert report.status == "failed" and report.pass_rate == 0.0  # nothing evaluated
    assert report.not_evaluated[:4] == [
        "user_simulator_config",
        "hallucinations_v1",
        "safety_v1",
        "conversation_scenario",
    ]


def test_the_sample_config_with_a_user_simulator_is_read_not_refused() -> None:
    criteria = read_criteria(HERE / "samples" / "test_config.json")
    assert criteria.criteria == [] and criteria.source == "adk"
    assert criteria.not_evaluated == ["user_simulator_config", "hallucinations_v1", "safety_v1"]
