"""OpenAIModel (Chat Completions and Responses) against a real loopback server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phloem.models.openai import OpenAIModel
from phloem.protocols.content import (
    Content,
    FunctionDeclaration,
    GenerateConfig,
    ModelRequest,
    Part,
    ThinkingConfig,
    Usage,
)
from phloem.protocols.model import ModelError
from phloem.protocols.openai_chat import INVALID_ARGUMENTS_KEY

from .fake_provider import (
    FakeProvider,
    chat_body,
    chat_calls,
    chat_text,
    chat_tool_call,
    json_reply,
    responses_body,
    responses_call,
    responses_message,
    responses_text,
)

pytestmark = pytest.mark.timeout(20)

WEATHER = FunctionDeclaration(
    name="weather",
    description="current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
ASK = ModelRequest(contents=(Content.user("weather?"),), tools=(WEATHER,))


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def chat(fake: FakeProvider, limit: str = "max_completion_tokens") -> OpenAIModel:
    return OpenAIModel(
        "chat_completions",
        "gpt-test",
        fake.base_url + "/v1",
        "k",
        chat_token_limit=limit,  # type: ignore[arg-type]
    )


def responses(fake: FakeProvider) -> OpenAIModel:
    return OpenAIModel("responses", "gpt-test", fake.base_url + "/v1", "k")


def history_request() -> ModelRequest:
    """A conversation with text, a thought, two calls (one without an id) and results."""
    return ModelRequest(
        system_instruction="be brief",
        tools=(WEATHER,),
        contents=(
            Content.user("weather in Oslo and Rome?"),
            Content(
                role="model",
                parts=(
                    Part.from_thought("two lookups"),
                    Part.from_text("Checking."),
                    Part.from_function_call("weather", {"city": "Oslo"}, id="c1"),
                    Part.from_function_call("weather", {"city": "Rome"}),
                ),
            ),
            Content(
                role="user",
                parts=(
                    Part.from_function_response("weather", {"temp": 3}, id="c1"),
                    Part.from_function_response("weather", {"temp": 20}),
                ),
            ),
            Content.model("Oslo 3, Rome 20."),
            Content(
                role="user", parts=(Part.from_text("thanks"), Part.from_bytes(b"PNG", "image/png"))
            ),
        ),
        config=GenerateConfig(max_output_tokens=99, temperature=0.1, stop_sequences=("END",)),
    )


# -- Chat Completions ---------------------------------------------------------------


def test_chat_history_is_sent_in_order_with_resolved_call_ids(fake: FakeProvider) -> None:
    fake.add(chat_text("ok"))
    assert chat(fake).generate(history_request()).text == "ok"
    sent = fake.requests[0]
    assert sent.path == "/v1/chat/completions"
    body = sent.json
    assert body["model"] == "gpt-test"
    assert body["stream"] is False
    assert body["max_completion_tokens"] == 99
    assert body["stop"] == ["END"]
    assert body["tool_choice"] == "auto"
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "current weather",
            "parameters": WEATHER.parameters,
        },
    }
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather in Oslo and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                },
                {
                    "id": "phloem-call-1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp":3}'},
        {"role": "tool", "tool_call_id": "phloem-call-1", "content": '{"temp":20}'},
        {"role": "assistant", "content": "Oslo 3, Rome 20."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "thanks"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,UE5H"}},
            ],
        },
    ]


def test_chat_token_limit_field_follows_the_config(fake: FakeProvider) -> None:
    fake.add(chat_text("ok"))
    chat(fake, "max_tokens").generate(
        ModelRequest(contents=(Content.user("x"),), config=GenerateConfig(max_output_tokens=7))
    )
    body = fake.requests[0].json
    assert body["max_tokens"] == 7
    assert "max_completion_tokens" not in body


def test_chat_tool_call_round_trip_and_usage(fake: FakeProvider) -> None:
    fake.add(chat_calls(chat_tool_call("weather", '{"city": "Oslo"}', "call_9")))
    response = chat(fake).generate(ASK)
    call = response.function_calls[0]
    assert (call.name, call.args, call.id) == ("weather", {"city": "Oslo"}, "call_9")
    assert response.finish_reason == "STOP"
    assert response.usage == Usage(input_tokens=9, output_tokens=3, total_tokens=12)
    assert response.model_version == "fake-chat"


def test_missing_and_duplicate_call_ids_get_deterministic_replacements(fake: FakeProvider) -> None:
    calls = [
        chat_tool_call("weather", "{}", "dup"),
        chat_tool_call("weather", "{}", None),
        chat_tool_call("weather", "{}", "dup"),
        chat_tool_call("weather", "{}", "phloem-call-1"),
    ]
    fake.add(chat_calls(*calls), chat_calls(*calls))
    model = chat(fake)
    first = [c.id for c in model.generate(ASK).function_calls]
    second = [c.id for c in model.generate(ASK).function_calls]
    assert first == second == ["dup", "phloem-call-1-1", "phloem-call-2", "phloem-call-1"]


@pytest.mark.parametrize("blank", ["", "   ", None])
def test_blank_arguments_become_an_empty_object(fake: FakeProvider, blank: str | None) -> None:
    fake.add(
        chat_calls(
            {"id": "c", "type": "function", "function": {"name": "weather", "arguments": blank}}
        )
    )
    assert chat(fake).generate(ASK).function_calls[0].args == {}


@pytest.mark.parametrize("bad", ['{"a": 1', '{"a": 1} trailing', "null", "[1, 2]", "42", '"s"'])
def test_malformed_arguments_fail_closed_unless_recovery_is_asked(
    fake: FakeProvider, bad: str
) -> None:
    fake.add(chat_calls(chat_tool_call("weather", bad)), chat_calls(chat_tool_call("weather", bad)))
    model = chat(fake)
    with pytest.raises(ModelError) as info:
        model.generate(ASK)
    assert info.value.kind == "malformed_arguments"
    assert bad not in info.value.message
    recovered = model.generate(ASK, recover_arguments=True).function_calls[0]
    assert set(recovered.args) == {INVALID_ARGUMENTS_KEY}


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("stop", "STOP"),
        ("tool_calls", "STOP"),
        ("length", "MAX_TOKENS"),
        ("content_filter", "SAFETY"),
        ("odd", "OTHER"),
    ],
)
def test_chat_finish_reasons_are_mapped(fake: FakeProvider, wire: str, expected: str) -> None:
    fake.add(chat_text("x", finish=wire))
    assert chat(fake).generate(ASK).finish_reason == expected


def test_leading_think_block_is_stripped_into_a_thought(fake: FakeProvider) -> None:
    fake.add(
        chat_text("  <think>\nlet me see\n</think>\n\nThe answer."), chat_text("a <think>x</think>")
    )
    model = chat(fake)
    response = model.generate(ASK)
    assert response.text == "The answer."
    assert response.thoughts == "\nlet me see\n"
    assert model.generate(ASK).text == "a <think>x</think>"


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"choices": []}, "empty_choices"),
        ({}, "empty_choices"),
        (
            {"choices": [chat_body("a")["choices"][0], chat_body("b")["choices"][0]]},
            "multiple_choices",
        ),
        (chat_body(None, [{"id": "x", "type": "custom", "custom": {}}]), "unsupported_tool_call"),
        (
            chat_body(None, [{"id": "x", "type": "function", "function": {"arguments": "{}"}}]),
            "missing_function_name",
        ),
        ({"choices": "nope"}, "malformed_response"),
    ],
)
def test_chat_error_kinds(fake: FakeProvider, body: dict[str, object], kind: str) -> None:
    fake.add(json_reply(body))
    with pytest.raises(ModelError) as info:
        chat(fake).generate(ASK)
    assert info.value.kind == kind


def test_unsupported_content_and_invalid_tool_results_fail_before_sending(
    fake: FakeProvider,
) -> None:
    model = chat(fake)
    audio = ModelRequest(
        contents=(
            Content(role="user", parts=(Part.from_bytes(b"x", "audio/wav"), Part.from_text("hi"))),
        )
    )
    with pytest.raises(ModelError) as info:
        model.generate(audio)
    assert info.value.kind == "unsupported_content"
    unpaired = ModelRequest(
        contents=(
            Content(
                role="user", parts=(Part.from_function_response("weather", {"t": 1}, id="nope"),)
            ),
        )
    )
    with pytest.raises(ModelError) as info:
        model.generate(unpaired)
    assert info.value.kind == "invalid_tool_result"
    twice = ModelRequest(
        contents=(
            Content(role="model", parts=(Part.from_function_call("weather", {}, id="c1"),)),
            Content(role="user", parts=(Part.from_function_response("weather", {}, id="c1"),)),
            Content(role="user", parts=(Part.from_function_response("weather", {}, id="c1"),)),
        )
    )
    with pytest.raises(ModelError) as info:
        model.generate(twice)
    assert info.value.kind == "duplicate_tool_call_id"
    bad = {"v": object()}
    not_json = ModelRequest(
        contents=(
            Content(role="model", parts=(Part.from_function_call("weather", {}, id="c1"),)),
            Content(role="user", parts=(Part.from_function_response("weather", bad, id="c1"),)),
        )
    )
    with pytest.raises(ModelError) as info:
        model.generate(not_json)
    assert info.value.kind == "invalid_tool_result"
    assert "object" not in info.value.message
    assert fake.requests == []


def test_streaming_is_unsupported(fake: FakeProvider) -> None:
    with pytest.raises(ModelError) as info:
        next(iter(chat(fake).stream(ASK)))
    assert info.value.kind == "unsupported_streaming"


def test_forced_function_becomes_a_named_tool_choice(fake: FakeProvider) -> None:
    fake.add(chat_text("x"), responses_text("y"))
    forced = ModelRequest(
        contents=ASK.contents, tools=ASK.tools, config=GenerateConfig(forced_function="weather")
    )
    chat(fake).generate(forced)
    responses(fake).generate(forced)
    assert fake.requests[0].json["tool_choice"] == {
        "type": "function",
        "function": {"name": "weather"},
    }
    assert fake.requests[1].json["tool_choice"] == {"type": "function", "name": "weather"}


# -- Responses ----------------------------------------------------------------------


def test_responses_history_becomes_ordered_input_items(fake: FakeProvider) -> None:
    fake.add(responses_text("ok"))
    request = history_request()
    request = ModelRequest(
        contents=request.contents,
        system_instruction=request.system_instruction,
        tools=request.tools,
        config=GenerateConfig(
            max_output_tokens=99, thinking_config=ThinkingConfig(include_thoughts=True)
        ),
    )
    assert responses(fake).generate(request).text == "ok"
    sent = fake.requests[0]
    assert sent.path == "/v1/responses"
    body = sent.json
    assert body["instructions"] == "be brief"
    assert body["store"] is False
    assert body["max_output_tokens"] == 99
    assert body["reasoning"] == {"summary": "auto"}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "current weather",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "weather in Oslo and Rome?"}],
        },
        {"type": "message", "role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city":"Oslo"}',
        },
        {
            "type": "function_call",
            "call_id": "phloem-call-1",
            "name": "weather",
            "arguments": '{"city":"Rome"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": '{"temp":3}'},
        {"type": "function_call_output", "call_id": "phloem-call-1", "output": '{"temp":20}'},
        {"type": "message", "role": "assistant", "content": "Oslo 3, Rome 20."},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "thanks"},
                {"type": "input_image", "image_url": "data:image/png;base64,UE5H"},
            ],
        },
    ]


def test_responses_output_items_map_to_parts(fake: FakeProvider) -> None:
    fake.add(
        json_reply(
            responses_body(
                [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [{"type": "summary_text", "text": "think"}],
                    },
                    responses_message("calling"),
                    responses_call("weather", '{"city":"Oslo"}', "call_a"),
                    responses_call("weather", "", None),
                ]
            )
        )
    )
    response = responses(fake).generate(ASK)
    assert response.thoughts == "think"
    assert response.text == "calling"
    assert [(c.args, c.id) for c in response.function_calls] == [
        ({"city": "Oslo"}, "call_a"),
        ({}, "phloem-call-1"),
    ]
    assert response.usage == Usage(input_tokens=8, output_tokens=4, total_tokens=12)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            responses_body([responses_message("x")], status="incomplete")
            | {"incomplete_details": {"reason": "max_output_tokens"}},
            "MAX_TOKENS",
        ),
        (
            responses_body([responses_message("x")], status="incomplete")
            | {"incomplete_details": {"reason": "content_filter"}},
            "SAFETY",
        ),
        (
            responses_body(
                [{"type": "message", "content": [{"type": "refusal", "refusal": "no"}]}]
            ),
            "SAFETY",
        ),
    ],
)
def test_responses_finish_reasons(
    fake: FakeProvider, body: dict[str, object], expected: str
) -> None:
    fake.add(json_reply(body))
    assert responses(fake).generate(ASK).finish_reason == expected


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ([{"type": "web_search_call", "id": "w"}], "unsupported_tool_call"),
        ([responses_call("", "{}")], "missing_function_name"),
        ([responses_call("weather", "[1]")], "malformed_arguments"),
    ],
)
def test_responses_error_kinds(
    fake: FakeProvider, output: list[dict[str, object]], kind: str
) -> None:
    fake.add(json_reply(responses_body(output)))
    with pytest.raises(ModelError) as info:
        responses(fake).generate(ASK)
    assert info.value.kind == kind


def test_failed_response_reports_only_its_code(fake: FakeProvider) -> None:
    fake.add(
        json_reply(
            responses_body([], status="failed")
            | {"error": {"code": "server_error", "message": "k leaked"}}
        )
    )
    with pytest.raises(ModelError) as info:
        responses(fake).generate(ASK)
    assert info.value.message == "response failed (server_error)"


# -- configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "field", "message"),
    [
        ({"protocol": "completions"}, None, "protocol must be responses or chat_completions"),
        ({"base_url": "ftp://h/v1"}, None, "base_url must use http or https"),
        ({"base_url": "http://user:pw@h/v1"}, None, "base_url must not contain userinfo"),
        ({"base_url": "http:///v1"}, None, "base_url must have a host"),
        ({"base_url": "http://h/v1?x=1"}, None, "base_url must not have a query or fragment"),
        ({"model": ""}, "model", None),
        ({"max_retries": 11}, "max_retries", "max_retries must be between 0 and 10"),
        ({"max_retries": -1}, "max_retries", "max_retries must be between 0 and 10"),
        ({"chat_token_limit": None}, "chat_token_limit", None),
        ({"timeout": 0}, "timeout", None),
    ],
)
def test_config_errors_name_the_field(
    override: dict[str, object], field: str | None, message: str | None
) -> None:
    options: dict[str, object] = {
        "protocol": "chat_completions",
        "model": "m",
        "base_url": "http://h/v1",
        "chat_token_limit": "max_tokens",
    }
    options.update(override)
    with pytest.raises(ModelError) as info:
        OpenAIModel(**options)  # type: ignore[arg-type]
    assert info.value.kind == "config_invalid"
    if message is not None:
        assert info.value.message == message
    if field is not None:
        assert field in info.value.message


def test_chat_token_limit_is_refused_for_responses() -> None:
    with pytest.raises(ModelError, match="chat_token_limit applies only to chat_completions"):
        OpenAIModel("responses", "m", "http://h/v1", chat_token_limit="max_tokens")


def test_retry_bounds_are_accepted_at_their_edges() -> None:
    for retries in (0, 10):
        OpenAIModel("responses", "m", "https://h/v1", max_retries=retries).close()


def test_protocol_is_fixed_at_construction() -> None:
    model = OpenAIModel("responses", "m", "https://h/v1")
    with pytest.raises(AttributeError):
        model.protocol = "chat_completions"  # type: ignore[misc]
    assert model.protocol == "responses"
    model.close()
