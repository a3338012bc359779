"""SupervisorPlanner: prompt, parsing, loud failures, cost cap."""

from __future__ import annotations

import pytest

from phloem.agents import PlannerAgent, SupervisorPlanner, run_agent
from phloem.models import ScriptedModel
from phloem.protocols.content import ModelResponse, Usage
from phloem.protocols.model import ModelError
from tests.actors.agents.helpers import writer

pytestmark = pytest.mark.timeout(30)


def team(model: ScriptedModel, **kw: object) -> PlannerAgent:
    agents = [writer("research", "notes"), writer("write", "draft"), writer("review", "verdict")]
    agents[0].description = "Collects notes on the topic"
    return PlannerAgent("lead", "", lambda: SupervisorPlanner(model, **kw), agents)  # type: ignore[arg-type]


def test_the_model_drives_the_run_and_its_decisions_are_in_the_prompt() -> None:
    model = ScriptedModel(["research", "write, review", "DONE: brief ready"])
    run = run_agent(team(model, system_instruction="Be brief."), input="Write about ACME")
    assert run.outcome.status == "done_with_result"
    assert run.outcome.result == "brief ready"
    groups = [d.agents for d in run.outcome.decisions if d.action == "run_agents"]
    assert groups == [("research",), ("write", "review")]
    first, second, third = (r.contents[0].text for r in model.requests)
    assert "- research: Collects notes on the topic" in first
    assert "Original request: Write about ACME" in first
    assert "State keys present: (none)" in first
    assert "Your decisions so far" not in first
    assert "1. Run: research" in second and "notes" in second
    assert "2. Run: write, review" in third
    assert model.requests[0].system_instruction == "Be brief."


@pytest.mark.parametrize("answer", ["", "DONE", "done", "  Done  "])
def test_empty_or_done_answers_end_the_run_done(answer: str) -> None:
    run = run_agent(team(ScriptedModel([answer])))
    assert run.outcome.status == "done"


def test_an_unknown_agent_is_a_plan_error_with_the_raw_answer_redacted() -> None:
    answer = "research, hacker api_key=sk-abcdefghijklmnopqrstuvwx"
    run = run_agent(team(ScriptedModel([answer])))
    assert run.outcome.status == "plan_error"
    assert "unknown agent 'hacker api_key=" in run.outcome.message
    error = run.outcome.error
    assert error is not None and error.details is not None
    assert "sk-abcdefghijklmnopqrstuvwx" not in str(error.details["answer"])
    assert "sk-abcdefghijklmnopqrstuvwx" not in run.outcome.message
    assert "[redacted]" in error.details["answer"]


def test_a_failed_model_call_is_model_failed_not_done() -> None:
    failure = ModelError("server_error", "upstream 503", status=503)
    run = run_agent(team(ScriptedModel(["research", failure])))
    assert run.outcome.status == "model_failed"
    assert "upstream 503" in run.outcome.message
    assert run.outcome.model_calls == 2
    assert run.state["notes"] == "research done"


def test_model_calls_are_capped_and_the_cost_is_reported() -> None:
    usage = Usage(input_tokens=100, output_tokens=3, total_tokens=103)
    answer = ModelResponse(content=ModelResponse.from_text("research").content, usage=usage)
    model = ScriptedModel([answer] * 10)
    run = run_agent(team(model, max_model_calls=3))
    assert run.outcome.status == "iteration_limit"
    assert "max_model_calls (3)" in run.outcome.message
    assert model.calls == 3
    assert run.outcome.model_calls == 3
    assert run.outcome.usage.input_tokens == 300 and run.outcome.usage.output_tokens == 9


def test_max_model_calls_and_max_events_are_validated() -> None:
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_model_calls must be between 1 and 10000$"
    ):
        SupervisorPlanner(ScriptedModel([]), max_model_calls=0)
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_events must be between 1 and 1000$"
    ):
        SupervisorPlanner(ScriptedModel([]), max_events=0)


def test_only_the_last_max_events_events_are_shown() -> None:
    model = ScriptedModel(["research", "write", "review", "DONE"])
    run_agent(team(model, max_events=1))
    last = model.requests[-1].contents[0].text
    recent = last.split("Recent events:\n")[1].split("\n\n")[0]
    assert recent.count("\n- ") == 0 and recent.startswith("- review")


def test_decision_history_does_not_leak_between_runs() -> None:
    model = ScriptedModel(["research", "DONE", "DONE"])
    agent = team(model)
    run_agent(agent)
    run_agent(agent)
    assert "Your decisions so far" not in model.requests[2].contents[0].text
