"""What a PlannerAgent run says and records (seed 003): `Done` emits no text, a run with
no sub-agents says nothing, `DoneWithResult` says its result, and the outcome and each
group's decision carry their wall time."""

from __future__ import annotations

import time
from typing import Any

import pytest

from phloem.agents import (
    Done,
    DoneWithResult,
    FunctionAgent,
    InlineExecutor,
    LlmAgent,
    Planner,
    PlannerAction,
    PlannerAgent,
    PlanningContext,
    RunAgents,
    SequentialPlanner,
    run_agent,
)
from phloem.agents.session import InMemorySessionService
from phloem.models import ScriptedModel
from tests.actors.agents.helpers import writer

pytestmark = pytest.mark.timeout(45)


def said(run: Any) -> list[str]:
    return [e.text for e in run.events if e.author != "user" and e.text]


def test_done_ends_the_run_with_a_status_event_that_says_nothing() -> None:
    answer = LlmAgent("writer", "", ScriptedModel(["the answer"]))
    run = run_agent(PlannerAgent("plan", "", SequentialPlanner, [answer]), input="go")
    assert run.outcome.status == "done"
    assert said(run) == ["the answer"]  # no "done after 2 iterations" line
    final = run.events[-1]
    assert final == run.outcome.final_event
    assert final.planner_status == "done" and final.content is None
    assert run.outcome.message == "done after 2 iterations"  # the status stays on the outcome
    assert run.output == "the answer"


def test_no_sub_agents_is_done_at_once_with_nothing_said() -> None:
    run = run_agent(PlannerAgent("plan", "", SequentialPlanner, []), input="go")
    assert run.outcome.status == "done" and run.outcome.iterations == 0
    assert said(run) == []
    [final] = [e for e in run.events if e.author == "plan"]
    assert final.planner_status == "done" and final.content is None


class _ResultPlanner(Planner):
    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        return DoneWithResult("the result")

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        return Done()


def test_done_with_result_says_one_text_event_by_the_planner_agent() -> None:
    run = run_agent(PlannerAgent("plan", "", _ResultPlanner, [writer("a", "x")]), input="go")
    assert said(run) == ["the result"]
    assert run.events[-1].author == "plan" and run.events[-1].planner_status == "done_with_result"


def test_a_failed_run_still_says_why() -> None:
    agents = [writer("a", "x"), writer("b", "y")]
    run = run_agent(PlannerAgent("plan", "", SequentialPlanner, agents, max_iterations=1))
    assert run.outcome.status == "iteration_limit"
    assert "max_iterations (1) reached" in run.events[-1].text


def test_the_status_never_reaches_a_later_model_call() -> None:
    sessions = InMemorySessionService()
    session = sessions.create_session("app", "user")
    answer = LlmAgent("writer", "", ScriptedModel(["the answer"]))
    planner = PlannerAgent("plan", "", SequentialPlanner, [answer])
    run_agent(planner, input="go", sessions=sessions, session=session)
    model = ScriptedModel(["ok"])
    run_agent(LlmAgent("next", "", model), input="and now?", sessions=sessions, session=session)
    prompt = " ".join(c.text for c in model.requests[0].contents)  # the earlier turn's events
    assert "the answer" in prompt and "iterations" not in prompt


class _Pause(Planner):
    """Runs `slow` (which sleeps 0.3 s), then `quick`, then stops."""

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        self.left = [["slow"], ["quick"]]
        return RunAgents(self.left.pop(0))

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        return RunAgents(self.left.pop(0)) if self.left else Done()


def test_the_outcome_and_each_group_record_their_wall_time() -> None:
    slow = FunctionAgent("slow", "", lambda: time.sleep(0.3) or "s", output_key="s")
    quick = FunctionAgent("quick", "", lambda: "q", output_key="q")
    agent = PlannerAgent("plan", "", _Pause, [slow, quick])
    run = run_agent(agent, executor=InlineExecutor())
    groups = [d for d in run.outcome.decisions if d.action == "run_agents"]
    assert [d.agents for d in groups] == [("slow",), ("quick",)]
    assert groups[0].duration_ms >= 300  # the group slept 0.3 s
    assert all(d.duration_ms == 0 for d in run.outcome.decisions if d.action == "done")
    assert run.outcome.duration_ms >= groups[0].duration_ms + groups[1].duration_ms
    # a plain agent's derived outcome is timed too
    plain = run_agent(FunctionAgent("f", "", lambda: time.sleep(0.2) or "x"))
    assert plain.outcome.duration_ms >= 200


class _Looks(Planner):
    """Records what its planning context says of the invocation, then stops."""

    seen: list[Any] = []

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        inv = ctx.invocation_context
        assert inv is not None
        _Looks.seen[:] = [inv.session_id, inv.invocation_id == ctx.invocation_id, inv.cancel]
        return Done()

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        return Done()


def test_the_planning_context_offers_the_invocation_context() -> None:
    run = run_agent(PlannerAgent("plan", "", _Looks, [writer("a", "x")]), input="go")
    session_id, same_invocation, cancel = _Looks.seen
    assert session_id == run.session_id and same_invocation and not cancel.cancelled
