"""LlmAgent: templating, tool calls, output key, model failures."""

from __future__ import annotations

from typing import Any

import pytest

from phloem import PhloemError
from phloem.agents import InvocationContext, LlmAgent
from phloem.agents.templating import render
from phloem.models import ScriptedModel
from phloem.protocols.content import Content, ModelResponse, Part
from phloem.protocols.model import ModelError

pytestmark = pytest.mark.timeout(30)


def test_templating_fills_required_and_optional_keys() -> None:
    state = {"company": "ACME", "user:name": "Ann"}
    assert render("Hi {user:name}, about {company}{missing?}.", state) == "Hi Ann, about ACME."
    assert (
        render('JSON like {"a": 1} and { spaced } stay', {})
        == 'JSON like {"a": 1} and { spaced } stay'
    )
    with pytest.raises(PhloemError, match="instruction needs state key 'company'") as info:
        render("{company}", {})
    assert info.value.kind == "missing_state_key"


def test_one_model_call_per_turn_and_the_final_text_goes_to_the_output_key() -> None:
    model = ScriptedModel(["ACME files on time."])
    agent = LlmAgent("filings", "", model, "Find filings for {company}.", output_key="filings")
    ctx = InvocationContext(state={"company": "ACME"}, user_content=Content.user("brief"))
    events = list(agent.run(ctx))
    assert [e.actions.state_delta for e in events] == [{"filings": "ACME files on time."}]
    [request] = model.requests
    assert request.system_instruction == "Find filings for ACME."
    assert request.contents[0].text == "brief"


def test_tool_calls_are_executed_and_answered() -> None:
    def lookup(company: str) -> dict[str, Any]:
        """Look up the latest filing."""
        return {"filing": f"{company} 10-K"}

    def broken() -> None:
        raise RuntimeError("down")

    call = ModelResponse.from_parts(
        [
            Part.from_function_call("lookup", {"company": "ACME"}, "c1"),
            Part.from_function_call("broken", {}, "c2"),
        ]
    )
    model = ScriptedModel([call, "done"])
    agent = LlmAgent("f", "", model, "x", tools=[lookup, broken], output_key="out")
    events = list(agent.run(InvocationContext()))
    assert len(events) == 3
    answers = events[1].content
    assert answers is not None
    responses = [p.function_response for p in answers.parts]
    assert responses[0] is not None and responses[0].response == {"filing": "ACME 10-K"}
    assert responses[1] is not None
    assert responses[1].response == {"error": "exception", "message": "RuntimeError: down"}
    decl = model.requests[0].tools[0]
    assert decl.name == "lookup" and decl.parameters is not None
    assert decl.parameters["properties"]["company"] == {"type": "string"}
    assert len(model.requests[1].contents) == 2  # the call and its answers
    assert events[-1].actions.state_delta == {"out": "done"}


def test_tool_rounds_are_capped() -> None:
    def ping() -> str:
        return "pong"

    call = ModelResponse.from_parts([Part.from_function_call("ping", {})])
    agent = LlmAgent("f", "", ScriptedModel([call] * 5), tools=[ping], max_tool_rounds=2)
    events = list(agent.run(InvocationContext()))
    assert events[-1].error is not None and events[-1].error.kind == "tool_round_limit"


def test_a_failed_model_call_is_an_error_event() -> None:
    agent = LlmAgent("f", "", ScriptedModel([ModelError("timeout", "took too long")]))
    [event] = list(agent.run(InvocationContext()))
    assert event.error is not None and event.error.kind == "model_failed"


def test_a_missing_template_key_is_an_error_event() -> None:
    agent = LlmAgent("f", "", ScriptedModel([]), "about {company}")
    [event] = list(agent.run(InvocationContext()))
    assert event.error is not None and event.error.kind == "missing_state_key"


def test_a_plan_react_request_planner_shapes_requests_and_answers() -> None:
    from phloem.models.request_planners import PlanReActPlanner

    answer = "/*PLANNING*/ look it up /*FINAL_ANSWER*/ ACME is fine."
    model = ScriptedModel([answer])
    agent = LlmAgent("f", "", model, "Be careful.", output_key="out", planner=PlanReActPlanner())
    [event] = list(agent.run(InvocationContext()))
    [request] = model.requests
    assert request.system_instruction is not None
    assert request.system_instruction.startswith("Be careful.")
    assert "/*FINAL_ANSWER*/" in request.system_instruction
    assert event.actions.state_delta == {"out": "ACME is fine."}


def test_coding_tools_run_in_their_workspace(tmp_path: Any) -> None:
    from phloem.tools.contract import ToolContext
    from phloem.tools.read import ReadTool
    from phloem.tools.workspace import Workspace

    (tmp_path / "notes.txt").write_text("ACME ships on Fridays\n")
    call = ModelResponse.from_parts([Part.from_function_call("read", {"path": "notes.txt"})])
    model = ScriptedModel([call, "Fridays"])
    ctx = ToolContext(workspace=Workspace(tmp_path))
    agent = LlmAgent("f", "", model, tools=[ReadTool()], output_key="out", tool_context=ctx)
    events = list(agent.run(InvocationContext()))
    answers = events[1].content
    assert answers is not None and answers.parts[0].function_response is not None
    assert "ACME ships on Fridays" in str(answers.parts[0].function_response.response)
    assert model.requests[0].tools[0].name == "read"
    assert events[-1].actions.state_delta == {"out": "Fridays"}
    with pytest.raises(TypeError, match="needs tool_context"):
        LlmAgent("g", "", model, tools=[ReadTool()])


def test_exit_loop_escalates_and_ends_a_loop_planner() -> None:
    from phloem.agents import LoopPlanner, PlannerAgent, run_agent
    from phloem.agents.llm_agent import exit_loop

    call = ModelResponse.from_parts([Part.from_function_call("exit_loop", {})])
    model = ScriptedModel(["draft 1", "too vague", "draft 2", call, "good now"])
    writer = LlmAgent("writer", "", model, "Improve the draft.", output_key="draft")
    critic = LlmAgent("critic", "", model, "Stop when good.", tools=[exit_loop])
    run = run_agent(PlannerAgent("loop", "", lambda: LoopPlanner(5), [writer, critic]))
    # writer, critic, writer, critic calls exit_loop (its answer event escalates, then it
    # speaks once more) -> the loop ends although the escalation is not the last event
    assert run.outcome.status == "done"
    assert run.state["draft"] == "draft 2"
    escalations = [e for e in run.events if e.actions.escalate]
    assert [e.author for e in escalations] == ["critic"]
    assert model.calls == 5
    assert run.events[-2].author == "critic" and run.events[-2].text == "good now"


# -- one tool contract for plain callables and coding tools -----------------------------


def _answers(events: list[Any]) -> list[dict[str, Any]]:
    """The tool answers of an agent run, in call order."""
    responses = []
    for event in events:
        for part in event.content.parts if event.content is not None else ():
            if part.function_response is not None:
                responses.append(part.function_response.response)
    return responses


def _lookup(company: str) -> str:
    """Look up the latest filing."""
    return f"{company} 10-K"


def test_a_callable_and_a_coding_tool_are_exposed_through_the_one_contract(
    tmp_path: Any,
) -> None:
    from phloem.tools import FunctionTool, ToolContext, Workspace
    from phloem.tools.read import ReadTool

    (tmp_path / "notes.txt").write_text("ACME ships on Fridays\n")
    ctx = ToolContext(workspace=Workspace(tmp_path))
    call = ModelResponse.from_parts(
        [
            Part.from_function_call("_lookup", {"company": "ACME"}),
            Part.from_function_call("read", {"path": "notes.txt"}),
        ]
    )
    model = ScriptedModel([call, "ok"])
    agent = LlmAgent("f", "", model, tools=[_lookup, ReadTool()], tool_context=ctx)
    lookup, read = _answers(list(agent.run(InvocationContext())))
    assert lookup == {"result": "ACME 10-K"}
    assert read["content"] == "     1\tACME ships on Fridays\n"
    # the declarations the model sees are the tools' own, one conversion for both
    expected = [FunctionTool.from_callable(_lookup).declaration(), ReadTool().declaration()]
    assert list(model.requests[0].tools) == expected
    assert all(d.parameters and d.parameters["additionalProperties"] is False for d in expected)


@pytest.mark.parametrize(
    ("lookup_args", "read_args", "message"),
    [
        ({"company": "ACME", "extra": 1}, {"path": "a", "extra": 1}, "unknown argument extra"),
        ({"company": 5}, {"path": 5}, "{} must be a string"),
        ({}, {}, "{} is required"),
    ],
)
def test_invalid_arguments_give_the_same_failure_value_for_callables_and_coding_tools(
    tmp_path: Any, lookup_args: Any, read_args: Any, message: str
) -> None:
    from phloem.tools import ToolContext, Workspace
    from phloem.tools.read import ReadTool

    ctx = ToolContext(workspace=Workspace(tmp_path))
    parts = [
        Part.from_function_call("_lookup", lookup_args),
        Part.from_function_call("read", read_args),
    ]
    model = ScriptedModel([ModelResponse.from_parts(parts), "ok"])
    agent = LlmAgent("f", "", model, tools=[_lookup, ReadTool()], tool_context=ctx)
    lookup, read = _answers(list(agent.run(InvocationContext())))
    assert lookup == {"error": "arguments", "message": message.format("company")}
    assert read == {"error": "arguments", "message": message.format("path")}


def test_unknown_tools_and_oversized_results_are_failure_values() -> None:
    from phloem.agents.llm_agent import MAX_TOOL_RESULT_BYTES

    def huge() -> str:
        return "x" * MAX_TOOL_RESULT_BYTES

    call = ModelResponse.from_parts(
        [Part.from_function_call("nope", {}), Part.from_function_call("huge", {})]
    )
    agent = LlmAgent("f", "", ScriptedModel([call, "ok"]), tools=[huge])
    nope, too_big = _answers(list(agent.run(InvocationContext())))
    assert nope == {"error": "unknown_tool", "message": "no tool named nope"}
    assert too_big == {
        "error": "too_large",
        "message": f"tool result over {MAX_TOOL_RESULT_BYTES} bytes",
    }


def test_tools_must_follow_the_contract() -> None:
    model = ScriptedModel([])
    with pytest.raises(TypeError, match=r"^a tool must be a phloem.tools Tool or a plain"):
        LlmAgent("f", "", model, tools=["read"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"^a tool named _lookup is already registered$"):
        LlmAgent("f", "", model, tools=[_lookup, _lookup])


def test_agents_and_one_shot_runs_answer_a_bad_call_with_the_same_failure_value() -> None:
    from phloem.models.oneshot import run

    def bad_call() -> ModelResponse:
        return ModelResponse.from_parts([Part.from_function_call("_lookup", {"company": 5})])

    agent_model = ScriptedModel([bad_call(), "ok"])
    agent = LlmAgent("f", "", agent_model, tools=[_lookup])
    [from_agent] = _answers(list(agent.run(InvocationContext())))
    one_shot = run(
        ScriptedModel([bad_call(), "ok"]),
        "",
        "go",
        [_lookup],
        max_output_tokens=10,
        max_returned_text_bytes=100,
        max_model_calls=2,
        max_tool_calls_per_response=1,
    )
    assert one_shot.ok, one_shot.error
    [from_one_shot] = [r.response for r in one_shot.tool_results]
    assert (
        from_agent == from_one_shot == {"error": "arguments", "message": "company must be a string"}
    )
