"""Raw (non-object) tool results (plasmid's RawChatToolResult): any JSON value a tool
answers as `RawToolResult` goes verbatim into the Chat tool message; the Responses and
Gemini protocols and the durable session store refuse it instead of rewriting it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phloem.actors.sessions.durable import DurableSessionService
from phloem.agents.context import InvocationContext
from phloem.agents.events import Event
from phloem.agents.llm_agent import LlmAgent
from phloem.models.oneshot import run
from phloem.models.openai import OpenAIModel
from phloem.protocols import gemini, openai_chat, openai_responses
from phloem.protocols.content import Content, ModelRequest, Part, RawToolResult
from phloem.protocols.errors import PhloemError
from phloem.protocols.model import ModelError
from phloem.tools.contract import FunctionTool
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

VALUES: list[Any] = [[1, "two", None], 3, "plain", None, True, {"nested": {"k": [1]}}]


def history(value: Any) -> ModelRequest:
    return ModelRequest(
        contents=(
            Content.user("go"),
            Content(role="model", parts=(Part.from_function_call("t", {}, id="c1"),)),
            Content(
                role="user",
                parts=(Part.from_function_response("t", RawToolResult(value), id="c1"),),
            ),
        )
    )


@pytest.mark.parametrize("value", VALUES)
def test_chat_sends_a_raw_result_verbatim(value: Any) -> None:
    body = openai_chat.encode_request(history(value), model="m", token_limit="max_tokens")
    [tool] = [m for m in body["messages"] if m["role"] == "tool"]
    assert tool["content"] == json.dumps(value, separators=(",", ":"))
    assert json.loads(tool["content"]) == value


def test_responses_and_gemini_refuse_a_raw_result() -> None:
    with pytest.raises(ModelError) as responses:
        openai_responses.encode_request(history([1]), model="m")
    assert responses.value.kind == "invalid_tool_result"
    with pytest.raises(ModelError) as by_gemini:
        gemini.encode_request(history([1]))
    assert by_gemini.value.kind == "invalid_tool_result"


def test_a_value_json_cannot_hold_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="JSON value") as err:
        RawToolResult(object())
    assert "object at" not in str(err.value)


def test_the_durable_store_refuses_a_raw_result(tmp_path: Path) -> None:
    store = DurableSessionService(tmp_path)
    session = store.create_session("phloem", "u")
    part = Part.from_function_response("t", RawToolResult([1]), id="c1")
    with pytest.raises(PhloemError) as err:
        store.append_event(session, Event(author="a", content=Content(role="user", parts=(part,))))
    assert err.value.kind == "invalid_tool_result"
    store.close()


def raw_lookup() -> Any:
    """Answers a bare list."""
    return RawToolResult(["a", 2])


def test_an_agent_and_a_one_shot_run_send_a_tools_raw_result(fake: FakeProvider) -> None:
    tool = FunctionTool("lookup", raw_lookup)
    for _ in range(2):
        fake.add(chat_calls(chat_tool_call("lookup", "{}", "c1")), chat_text("done"))
    model = OpenAIModel(
        "chat_completions",
        "m",
        f"{fake.base_url}/v1",
        "",
        chat_token_limit="max_tokens",
        max_retries=0,
    )
    agent = LlmAgent("a", "", model, tools=[tool])
    list(agent.run(InvocationContext()))
    one = run(
        model,
        "",
        "go",
        [tool],
        max_output_tokens=10,
        max_returned_text_bytes=100,
        max_model_calls=2,
        max_tool_calls_per_response=1,
    )
    model.close()
    assert one.ok, one.error
    assert one.tool_results[0].raw == '["a",2]'
    contents = [
        m["content"] for r in fake.requests for m in r.json["messages"] if m["role"] == "tool"
    ]
    assert contents == ['["a",2]', '["a",2]']


@pytest.fixture
def fake() -> Any:
    with FakeProvider() as provider:
        yield provider
