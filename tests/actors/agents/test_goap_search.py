"""GOAP search: DFS and A* groupings, cycles, unreachable goals, duplicates."""

from __future__ import annotations

import pytest

from phloem import PhloemError
from phloem.agents import (
    AgentMetadata,
    AStarSearch,
    DfsSearch,
    GoalOrientedPlanner,
    ReplanPolicy,
)
from tests.actors.agents.helpers import SUPPLIER, SUPPLIER_GROUPS

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize("search", [DfsSearch(), AStarSearch()], ids=["dfs", "astar"])
def test_the_supplier_example_groups_into_four_levels(search: DfsSearch | AStarSearch) -> None:
    assert search.search_grouped(SUPPLIER, {"company"}, "brief") == SUPPLIER_GROUPS


def test_dfs_orders_producers_post_order_in_declared_input_order() -> None:
    order = DfsSearch().search(SUPPLIER, {"company"}, "brief")
    assert order == ["fetchFilings", "analyzeFinancials", "fetchNews", "assessRisk", "writeBrief"]


def test_only_agents_the_goal_needs_are_planned() -> None:
    assert DfsSearch().search_grouped(SUPPLIER, {"company"}, "financials") == [
        ["fetchFilings"],
        ["analyzeFinancials"],
    ]
    assert AStarSearch().search_grouped(SUPPLIER, {"company"}, "financials") == [
        ["fetchFilings"],
        ["analyzeFinancials"],
    ]


def test_a_key_already_present_skips_its_producer() -> None:
    groups = DfsSearch().search_grouped(SUPPLIER, {"company", "financials"}, "brief")
    assert groups == [["fetchNews"], ["assessRisk"], ["writeBrief"]]


@pytest.mark.parametrize("search", [DfsSearch(), AStarSearch()], ids=["dfs", "astar"])
def test_goal_already_present_gives_an_empty_plan(search: DfsSearch | AStarSearch) -> None:
    assert search.search_grouped(SUPPLIER, {"company", "brief"}, "brief") == []


CYCLE = [AgentMetadata("a", ["x"], "y"), AgentMetadata("b", ["y"], "x")]


def test_dfs_reports_a_circular_dependency() -> None:
    with pytest.raises(PhloemError, match="circular dependency involving key 'y'") as info:
        DfsSearch().search(CYCLE, set(), "y")
    assert info.value.kind == "plan_error"


def test_a_present_key_breaks_a_cycle() -> None:
    assert DfsSearch().search_grouped(CYCLE, {"x"}, "y") == [["a"]]
    assert AStarSearch().search_grouped(CYCLE, {"x"}, "y") == [["a"]]


def test_astar_reports_an_unreachable_goal_for_a_cycle() -> None:
    with pytest.raises(PhloemError, match="cannot reach goal 'y'") as info:
        AStarSearch().search(CYCLE, set(), "y")
    assert info.value.kind == "plan_error"


def test_dfs_reports_an_unresolvable_dependency() -> None:
    with pytest.raises(PhloemError, match="cannot resolve dependency 'company'"):
        DfsSearch().search(SUPPLIER, set(), "brief")


def test_duplicate_output_keys_are_rejected() -> None:
    dup = [AgentMetadata("a", [], "x"), AgentMetadata("b", [], "x")]
    with pytest.raises(PhloemError, match="duplicate output key 'x'") as info:
        DfsSearch().search(dup, set(), "x")
    assert info.value.kind == "plan_error"
    with pytest.raises(PhloemError, match="duplicate output key"):
        GoalOrientedPlanner("x", dup)


def test_astar_gives_up_loudly_at_max_expansions() -> None:
    with pytest.raises(PhloemError, match=r"max_expansions \(1\)"):
        AStarSearch(max_expansions=1).search(SUPPLIER, {"company"}, "brief")
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_expansions must be between 1 and 10000000$"
    ):
        AStarSearch(max_expansions=0)


def test_groups_mirrors_a_run_and_raises_plan_error() -> None:
    planner = GoalOrientedPlanner("brief", SUPPLIER)
    assert planner.groups(["company"]) == SUPPLIER_GROUPS
    # fresh_outputs: a declared output in state is not counted as present
    assert planner.groups(["company", "filings"]) == SUPPLIER_GROUPS
    stale_ok = GoalOrientedPlanner("brief", SUPPLIER, fresh_outputs=False)
    assert stale_ok.groups(["company", "filings"]) == [
        ["analyzeFinancials", "fetchNews"],
        ["assessRisk"],
        ["writeBrief"],
    ]
    with pytest.raises(PhloemError) as info:
        planner.groups([])
    assert info.value.kind == "plan_error"
    with pytest.raises(PhloemError, match="circular"):
        GoalOrientedPlanner("y", CYCLE).groups([])


def test_groups_with_a_state_mapping_applies_validators() -> None:
    meta = [
        AgentMetadata("a", [], "x", validate=lambda v: v == "good"),
        AgentMetadata("b", ["x"], "y"),
    ]
    planner = GoalOrientedPlanner("y", meta, fresh_outputs=False)
    assert planner.groups({"x": "good"}) == [["b"]]
    assert planner.groups({"x": "bad"}) == [["a"], ["b"]]


def test_replan_policy_validates_max_attempts() -> None:
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_attempts must be between 1 and 100$"
    ):
        ReplanPolicy.replan(0)
    assert ReplanPolicy.replan(100).max_attempts == 100
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_attempts must be between 1 and 100$"
    ):
        ReplanPolicy.replan(101)


def test_json_schema_validators_are_checked_when_declared() -> None:
    meta = AgentMetadata("a", [], "x", validate={"type": "object", "required": ["score"]})
    assert meta.accepts({"score": 1})
    assert not meta.accepts("sorry, I cannot help")
    with pytest.raises(ValueError, match="validate is not a valid JSON schema"):
        AgentMetadata("a", [], "x", validate={"type": 12})
