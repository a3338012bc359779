"""GoalOrientedPlanner runs: replanning, fresh outputs, goal checks, validators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from phloem.agents import (
    AgentMetadata,
    AStarSearch,
    GoalOrientedPlanner,
    PlannerAgent,
    ReplanPolicy,
    run_agent,
)
from tests.actors.agents.helpers import SUPPLIER, SUPPLIER_GROUPS, supplier_agents

pytestmark = pytest.mark.timeout(30)


def flaky(results: list[Any]) -> Callable[..., Any]:
    """Returns the scripted results in turn (then the last one forever)."""
    calls = {"n": 0}

    def fn(**_: Any) -> Any:
        i = min(calls["n"], len(results) - 1)
        calls["n"] += 1
        return results[i]

    return fn


def brief_agent(
    replan: ReplanPolicy | None = None,
    overrides: dict[str, Any] | None = None,
    metadata: list[AgentMetadata] | None = None,
    **kw: Any,
) -> PlannerAgent:
    meta = metadata or SUPPLIER
    return PlannerAgent(
        "supplierBrief",
        "Builds a supplier risk brief",
        lambda: GoalOrientedPlanner("brief", meta, replan=replan, **kw),
        supplier_agents(overrides),
        max_iterations=12,
    )


@pytest.mark.parametrize("search", [None, AStarSearch()], ids=["dfs", "astar"])
def test_the_supplier_brief_runs_group_by_group(search: AStarSearch | None) -> None:
    agent = brief_agent(search=search) if search else brief_agent()
    run = run_agent(agent, state={"company": "ACME"})
    assert run.outcome.status == "done"
    groups = [list(d.agents) for d in run.outcome.decisions if d.action == "run_agents"]
    assert groups == SUPPLIER_GROUPS
    assert run.state["brief"] == "writeBrief(company,risk)"


def test_a_missing_output_with_replan_reruns_the_producer() -> None:
    agent = brief_agent(ReplanPolicy.replan(2), {"fetchFilings": flaky([None, "10-K"])})
    run = run_agent(agent, state={"company": "ACME"})
    assert run.outcome.status == "done"
    assert run.outcome.replans == 1
    groups = [list(d.agents) for d in run.outcome.decisions if d.action == "run_agents"]
    assert groups[:2] == [["fetchFilings", "fetchNews"], ["fetchFilings"]]
    assert any(
        "replan 1/2: missing fetchFilings -> filings" in n
        for d in run.outcome.decisions
        for n in d.notes
    )


def test_replanning_gives_up_after_max_attempts_and_the_goal_is_missing() -> None:
    agent = brief_agent(ReplanPolicy.replan(2), {"fetchFilings": flaky([None])})
    run = run_agent(agent, state={"company": "ACME"})
    assert run.outcome.status == "goal_missing"
    assert run.outcome.replans == 2
    assert run.outcome.result is not None
    assert "max replan attempts (2) exhausted" in run.outcome.result
    assert "fetchFilings -> filings" in run.outcome.result
    assert "goal key 'brief' is missing" in run.outcome.message


def test_the_replan_counter_resets_after_a_group_succeeds() -> None:
    agent = brief_agent(
        ReplanPolicy.replan(1),
        {"fetchFilings": flaky([None, "10-K"]), "assessRisk": flaky([None, "low"])},
    )
    run = run_agent(agent, state={"company": "ACME"})
    assert run.outcome.status == "done"
    assert run.outcome.replans == 2


def test_fail_stop_names_the_missing_outputs_and_reports_goal_missing() -> None:
    agent = brief_agent(ReplanPolicy.fail_stop(), {"fetchNews": flaky([None])})
    run = run_agent(agent, state={"company": "ACME"})
    assert run.outcome.status == "goal_missing"
    assert run.outcome.result == (
        "stopped: missing outputs from the previous group: fetchNews -> news"
    )


def test_ignore_carries_on_and_the_missing_goal_is_loud() -> None:
    agent = brief_agent(None, {"writeBrief": flaky([None])})
    run = run_agent(agent, state={"company": "ACME"})
    assert run.outcome.status == "goal_missing"
    assert not run.outcome.ok


def test_stale_outputs_are_cleared_before_planning() -> None:
    run = run_agent(brief_agent(), state={"company": "ACME", "filings": "stale", "brief": "old"})
    assert run.outcome.status == "done"
    first = run.events[0]
    assert first.author == "supplierBrief"
    assert first.actions.state_remove == ("brief", "filings")
    assert run.outcome.decisions[0].agents == ("fetchFilings", "fetchNews")
    assert run.state["filings"] == "fetchFilings(company)"


def test_fresh_outputs_false_keeps_present_outputs_as_the_reference_does() -> None:
    run = run_agent(brief_agent(fresh_outputs=False), state={"company": "ACME", "brief": "old"})
    assert run.outcome.status == "done"
    assert run.outcome.decisions[0].action == "done"
    assert run.state["brief"] == "old"


def test_output_that_fails_validation_counts_as_missing_and_triggers_replanning() -> None:
    meta = [
        m
        if m.agent != "assessRisk"
        else AgentMetadata(
            "assessRisk", m.input_keys, "risk", validate={"type": "object", "required": ["level"]}
        )
        for m in SUPPLIER
    ]
    apology = "Sorry, I could not assess the risk."
    agent = brief_agent(
        ReplanPolicy.replan(2), {"assessRisk": flaky([apology, {"level": "low"}])}, metadata=meta
    )
    run = run_agent(agent, state={"company": "ACME"})
    assert run.outcome.status == "done"
    assert run.outcome.replans == 1
    assert run.state["risk"] == {"level": "low"}


def test_an_invalid_goal_value_is_goal_missing() -> None:
    meta = [
        m
        if m.agent != "writeBrief"
        else AgentMetadata("writeBrief", m.input_keys, "brief", validate=lambda v: len(v) > 100)
        for m in SUPPLIER
    ]
    run = run_agent(brief_agent(metadata=meta), state={"company": "ACME"})
    assert run.outcome.status == "goal_missing"
    assert "fails validation" in run.outcome.message


def test_an_unreachable_goal_at_run_time_is_a_plan_error() -> None:
    run = run_agent(brief_agent())  # no company in state
    assert run.outcome.status == "plan_error"
    assert "cannot resolve dependency 'company'" in run.outcome.message


def test_a_contract_naming_an_agent_that_is_not_a_sub_agent_is_a_plan_error() -> None:
    meta = [*SUPPLIER[:4], AgentMetadata("ghostWriter", ["company", "risk"], "brief")]
    run = run_agent(brief_agent(metadata=meta), state={"company": "ACME"})
    assert run.outcome.status == "plan_error"
    assert "unknown agent 'ghostWriter'" in run.outcome.message
