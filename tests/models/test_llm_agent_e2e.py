"""LlmAgent driving real providers over loopback HTTP: a tool-calling turn end to end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from phloem.agents import LlmAgent, run_agent
from phloem.models.gemini import GeminiModel
from phloem.models.openai import OpenAIModel
from phloem.models.request_planners import BuiltInPlanner, PlanReActPlanner
from phloem.protocols.content import ThinkingConfig

from .fake_provider import (
    FakeProvider,
    chat_calls,
    chat_text,
    chat_tool_call,
    gemini_call,
    gemini_parts,
    gemini_text,
    json_reply,
    responses_body,
    responses_call,
    responses_text,
)

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def lookup_rating(company: str) -> str:
    """Credit rating of a company."""
    return {"Acme": "BBB+"}.get(company, "unknown")


def run_turn(model: Any) -> Any:
    agent = LlmAgent(
        "analyst",
        "rates suppliers",
        model,
        "Rate the supplier {company} using the tool.",
        tools=[lookup_rating],
        output_key="rating",
    )
    return run_agent(agent, input="How risky is Acme?", state={"company": "Acme"})


def test_llm_agent_with_gemini_runs_a_tool_calling_turn(fake: FakeProvider) -> None:
    fake.add(gemini_call("lookup_rating", {"company": "Acme"}), gemini_text("Acme is BBB+."))
    run = run_turn(GeminiModel("gemini-test", "k", base_url=fake.base_url))
    assert run.ok, run.outcome
    assert run.state["rating"] == "Acme is BBB+."
    first, second = (r.json for r in fake.requests)
    assert (
        first["systemInstruction"]["parts"][0]["text"] == "Rate the supplier Acme using the tool."
    )
    assert first["tools"][0]["functionDeclarations"][0]["name"] == "lookup_rating"
    answer = second["contents"][-1]["parts"][0]["functionResponse"]
    assert answer == {"name": "lookup_rating", "response": {"result": "BBB+"}}


def test_llm_agent_with_openai_chat_runs_a_tool_calling_turn(fake: FakeProvider) -> None:
    fake.add(
        chat_calls(chat_tool_call("lookup_rating", '{"company": "Acme"}', "call_7")),
        chat_text("Acme is BBB+."),
    )
    model = OpenAIModel(
        "chat_completions", "m", fake.base_url + "/v1", chat_token_limit="max_tokens"
    )
    run = run_turn(model)
    assert run.ok, run.outcome
    assert run.state["rating"] == "Acme is BBB+."
    messages = fake.requests[1].json["messages"]
    assert messages[-2]["tool_calls"][0]["id"] == "call_7"
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_7",
        "content": json.dumps({"result": "BBB+"}, separators=(",", ":")),
    }


def test_llm_agent_with_openai_responses_runs_a_tool_calling_turn(fake: FakeProvider) -> None:
    fake.add(
        json_reply(responses_body([responses_call("lookup_rating", '{"company":"Acme"}', "c9")])),
        responses_text("Acme is BBB+."),
    )
    run = run_turn(OpenAIModel("responses", "m", fake.base_url + "/v1"))
    assert run.ok, run.outcome
    assert run.state["rating"] == "Acme is BBB+."
    items = fake.requests[1].json["input"]
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "c9",
        "output": '{"result":"BBB+"}',
    }


def test_a_provider_failure_ends_the_agent_with_model_failed_and_no_key(
    fake: FakeProvider,
) -> None:
    fake.add(json_reply({"error": {"message": "key sk-e2e-secret rejected"}}, status=401))
    run = run_turn(GeminiModel("gemini-test", "sk-e2e-secret", base_url=fake.base_url))
    assert not run.ok
    error = run.events[-1].error
    assert error is not None and error.kind == "model_failed"
    assert error.message == "analyst: authentication: gemini returned HTTP 401"
    assert "sk-e2e-secret" not in repr(run.events)
    assert "rating" not in run.state


def test_llm_agent_with_plan_react_planner_over_gemini(fake: FakeProvider) -> None:
    fake.add(
        json_reply(
            gemini_parts(
                [
                    {"text": "/*PLANNING*/ 1. look up the rating"},
                    {"functionCall": {"name": "lookup_rating", "args": {"company": "Acme"}}},
                    {"text": "dropped: text after the call group"},
                ]
            )
        ),
        gemini_text("/*REASONING*/ BBB+ is investment grade /*FINAL_ANSWER*/ Low risk: BBB+."),
    )
    agent = LlmAgent(
        "analyst",
        "rates suppliers",
        GeminiModel("gemini-test", "k", base_url=fake.base_url),
        "Rate {company}.",
        tools=[lookup_rating],
        output_key="rating",
        planner=PlanReActPlanner(),
    )
    run = run_agent(agent, input="How risky is Acme?", state={"company": "Acme"})
    assert run.ok, run.outcome
    assert run.state["rating"] == "Low risk: BBB+."
    first, second = (r.json for r in fake.requests)
    system = first["systemInstruction"]["parts"][0]["text"]
    assert system.startswith("Rate Acme.\n\n") and "/*FINAL_ANSWER*/" in system
    # the earlier planning thought is resent as plain text, the dropped text is gone
    model_turn = second["contents"][-2]["parts"]
    assert model_turn[0] == {"text": "1. look up the rating"}
    assert [p.get("functionCall", {}).get("name") for p in model_turn[1:]] == ["lookup_rating"]


def test_llm_agent_with_built_in_planner_sends_thinking_config(fake: FakeProvider) -> None:
    fake.add(
        json_reply(gemini_parts([{"text": "hmm", "thought": True}, {"text": "BBB+"}])),
    )
    agent = LlmAgent(
        "analyst",
        "rates suppliers",
        GeminiModel("gemini-test", "k", base_url=fake.base_url),
        "Rate {company}.",
        output_key="rating",
        planner=BuiltInPlanner(ThinkingConfig(include_thoughts=True, thinking_budget=512)),
    )
    run = run_agent(agent, input="?", state={"company": "Acme"})
    assert run.ok, run.outcome
    assert run.state["rating"] == "BBB+"
    config = fake.requests[0].json["generationConfig"]
    assert config["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 512}
