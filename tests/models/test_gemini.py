"""GeminiModel against a real loopback HTTP server speaking Gemini REST."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator

import pytest

from phloem.models.gemini import GeminiModel
from phloem.protocols.content import (
    Content,
    FunctionDeclaration,
    GenerateConfig,
    ModelRequest,
    Part,
    ThinkingConfig,
    Usage,
)
from phloem.protocols.model import ModelError, ResponseTooLarge

from .fake_provider import (
    FakeProvider,
    Reply,
    gemini_call,
    gemini_parts,
    gemini_text,
    json_reply,
    sse_reply,
)

pytestmark = pytest.mark.timeout(20)

WEATHER = FunctionDeclaration(
    name="weather",
    description="current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def model_for(fake: FakeProvider, **kw: object) -> GeminiModel:
    return GeminiModel("gemini-test", "g-key", base_url=fake.base_url, **kw)  # type: ignore[arg-type]


def test_text_answer_with_usage_and_model_version(fake: FakeProvider) -> None:
    fake.add(gemini_text("hello there"))
    response = model_for(fake).generate(ModelRequest(contents=(Content.user("hi"),)))
    assert response.text == "hello there"
    assert response.finish_reason == "STOP"
    assert response.usage == Usage(input_tokens=5, output_tokens=7, total_tokens=12)
    assert response.model_version == "fake-gemini-001"
    sent = fake.requests[0]
    assert sent.path == "/models/gemini-test:generateContent"
    assert sent.headers["x-goog-api-key"] == "g-key"
    assert "authorization" not in sent.headers
    assert sent.json == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def test_request_carries_tools_config_thinking_and_system_instruction(fake: FakeProvider) -> None:
    fake.add(gemini_call("weather", {"city": "Oslo"}, call_id="g1"))
    request = ModelRequest(
        contents=(Content.user("weather?"),),
        system_instruction="be brief",
        tools=(WEATHER,),
        config=GenerateConfig(
            max_output_tokens=50,
            temperature=0.2,
            stop_sequences=("END",),
            thinking_config=ThinkingConfig(include_thoughts=True, thinking_budget=128),
            forced_function="weather",
        ),
    )
    response = model_for(fake).generate(request)
    call = response.function_calls[0]
    assert (call.name, call.args, call.id) == ("weather", {"city": "Oslo"}, "g1")
    body = fake.requests[0].json
    assert body["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "weather",
                    "description": "current weather",
                    "parametersJsonSchema": WEATHER.parameters,
                }
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}
    }
    assert body["generationConfig"] == {
        "maxOutputTokens": 50,
        "temperature": 0.2,
        "stopSequences": ["END"],
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 128},
    }


def test_function_call_round_trip_sends_history_with_signatures_and_responses(
    fake: FakeProvider,
) -> None:
    signature = b"\x01opaque"
    fake.add(
        json_reply(
            gemini_parts(
                [
                    {"text": "thinking...", "thought": True},
                    {
                        "functionCall": {"name": "weather", "args": {"city": "Oslo"}},
                        "thoughtSignature": base64.b64encode(signature).decode(),
                    },
                ]
            )
        ),
        gemini_text("It is 3 degrees."),
    )
    model = model_for(fake)
    first_request = ModelRequest(contents=(Content.user("weather?"),), tools=(WEATHER,))
    first = model.generate(first_request)
    assert first.thoughts == "thinking..."
    call = first.function_calls[0]
    assert call.id is not None and call.id.startswith("phloem-call-")
    assert first.parts[1].thought_signature == signature
    follow_up = ModelRequest(
        contents=(
            *first_request.contents,
            first.content,  # type: ignore[arg-type]
            Content(
                role="user",
                parts=(Part.from_function_response("weather", {"temp": 3}, id=call.id),),
            ),
        ),
        tools=(WEATHER,),
    )
    assert model.generate(follow_up).text == "It is 3 degrees."
    contents = fake.requests[1].json["contents"]
    assert contents[1]["parts"][1] == {
        "functionCall": {"name": "weather", "args": {"city": "Oslo"}},
        "thoughtSignature": base64.b64encode(signature).decode(),
    }
    # the id phloem invented is not sent to Gemini, which never issued it
    assert contents[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "weather", "response": {"temp": 3}}}],
    }


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("MAX_TOKENS", "MAX_TOKENS"),
        ("SAFETY", "SAFETY"),
        ("PROHIBITED_CONTENT", "SAFETY"),
        ("RECITATION", "RECITATION"),
        ("MALFORMED_FUNCTION_CALL", "MALFORMED_FUNCTION_CALL"),
        ("SOMETHING_NEW", "OTHER"),
    ],
)
def test_finish_reasons_are_normalised(fake: FakeProvider, wire: str, expected: str) -> None:
    fake.add(gemini_text("x", finish=wire))
    response = model_for(fake).generate(ModelRequest(contents=(Content.user("hi"),)))
    assert response.finish_reason == expected


def test_blocked_prompt_is_a_safety_answer_without_content(fake: FakeProvider) -> None:
    fake.add(json_reply({"promptFeedback": {"blockReason": "SAFETY"}}))
    response = model_for(fake).generate(ModelRequest(contents=(Content.user("hi"),)))
    assert response.finish_reason == "SAFETY"
    assert response.content is None


def test_answer_without_candidates_is_empty_choices(fake: FakeProvider) -> None:
    fake.add(json_reply({"candidates": []}))
    with pytest.raises(ModelError) as info:
        model_for(fake).generate(ModelRequest(contents=(Content.user("hi"),)))
    assert info.value.kind == "empty_choices"


def test_call_without_a_name_and_non_object_args_fail_with_their_kinds(fake: FakeProvider) -> None:
    fake.add(
        json_reply(gemini_parts([{"functionCall": {"name": "", "args": {}}}])),
        json_reply(gemini_parts([{"functionCall": {"name": "f", "args": [1, 2]}}])),
    )
    model = model_for(fake)
    request = ModelRequest(contents=(Content.user("hi"),))
    with pytest.raises(ModelError) as info:
        model.generate(request)
    assert info.value.kind == "missing_function_name"
    with pytest.raises(ModelError) as info:
        model.generate(request)
    assert info.value.kind == "malformed_arguments"


def test_malformed_body_names_the_path_but_not_the_value(fake: FakeProvider) -> None:
    fake.add(json_reply({"candidates": [{"finishReason": 12345678}]}))
    with pytest.raises(ModelError) as info:
        model_for(fake).generate(ModelRequest(contents=(Content.user("hi"),)))
    assert info.value.kind == "malformed_response"
    assert "$.candidates[0].finishReason" in info.value.message
    assert "12345678" not in str(info.value)


def test_stream_yields_partial_chunks_then_the_aggregated_answer(fake: FakeProvider) -> None:
    fake.add(
        sse_reply(
            [
                gemini_parts([{"text": "plan ", "thought": True}], finish=None),
                gemini_parts([{"text": "Hel"}], finish=None),
                gemini_parts([{"text": "lo"}], finish=None),
                gemini_parts(
                    [{"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}],
                    finish="STOP",
                    usage={"promptTokenCount": 2, "candidatesTokenCount": 3, "totalTokenCount": 5},
                ),
            ]
        )
    )
    chunks = list(
        model_for(fake).stream(ModelRequest(contents=(Content.user("hi"),), tools=(WEATHER,)))
    )
    assert [c.partial for c in chunks] == [True, True, True, True, False]
    assert [c.text for c in chunks[:3]] == ["", "Hel", "lo"]
    final = chunks[-1]
    assert final.thoughts == "plan "
    assert final.text == "Hello"
    assert [c.name for c in final.function_calls] == ["weather"]
    assert final.function_calls[0].id == "phloem-call-0"
    assert final.finish_reason == "STOP"
    assert final.usage == Usage(input_tokens=2, output_tokens=3, total_tokens=5)
    sent = fake.requests[0]
    assert sent.path == "/models/gemini-test:streamGenerateContent"
    assert sent.query == "alt=sse"
    assert sent.headers["accept"] == "text/event-stream"


def test_stream_error_event_fails_loudly(fake: FakeProvider) -> None:
    fake.add(
        sse_reply(
            [
                gemini_parts([{"text": "Hel"}], finish=None),
                {"error": {"code": 500, "status": "INTERNAL", "message": "secret g-key"}},
            ]
        )
    )
    stream = model_for(fake).stream(ModelRequest(contents=(Content.user("hi"),)))
    assert next(stream).text == "Hel"
    with pytest.raises(ModelError) as info:
        next(stream)
    assert info.value.kind == "server_error"
    assert "g-key" not in str(info.value)
    assert "INTERNAL" in info.value.message


def test_invalid_model_names_are_refused_before_any_request() -> None:
    for bad in ("", "../x", "a b", "x?y"):
        with pytest.raises(ModelError) as info:
            GeminiModel(bad, "k")
        assert info.value.kind == "config_invalid"
        assert info.value.details == {"field": "model"}
    assert GeminiModel("models/gemini-x", "k").model == "gemini-x"


def test_rate_limit_then_success_is_retried_for_gemini_too(fake: FakeProvider) -> None:
    waits: list[float] = []
    fake.add(Reply(status=429, headers={"retry-after": "1"}), gemini_text("ok"))
    model = model_for(fake, sleep=waits.append)
    assert model.generate(ModelRequest(contents=(Content.user("hi"),))).text == "ok"
    assert waits == [1.0]


def test_gzipped_stream_is_decoded_and_bounded(fake: FakeProvider) -> None:
    events = [gemini_parts([{"text": "x" * 100}], finish=None) for _ in range(50)]
    small = sse_reply(events[:2])
    big = sse_reply(events)
    fake.add(
        Reply(body=small.body, headers=small.headers, gzip=True),
        Reply(body=big.body, headers=big.headers, gzip=True),
    )
    model = model_for(fake, max_response_bytes=len(small.body) + 10)
    request = ModelRequest(contents=(Content.user("hi"),))
    assert list(model.stream(request))[-1].text == "x" * 200
    stream = model.stream(request)
    with pytest.raises(ResponseTooLarge):
        for _ in stream:
            pass
    assert len(fake.requests) == 2  # a stream that already started is never retried


def test_sse_events_split_across_lines_and_comments_are_parsed(fake: FakeProvider) -> None:
    first = json.dumps(gemini_parts([{"text": "a"}], finish=None))
    second = json.dumps(gemini_parts([{"text": "b"}]))
    body = f": keep-alive\n\ndata: {first}\n\ndata: {second}\r\n\r\n".encode()
    fake.add(Reply(body=body, headers={"content-type": "text/event-stream"}))
    chunks = list(model_for(fake).stream(ModelRequest(contents=(Content.user("hi"),))))
    assert [c.text for c in chunks] == ["a", "b", "ab"]


def test_stream_chunks_arrive_before_the_stream_ends(fake: FakeProvider) -> None:
    first = sse_reply([gemini_parts([{"text": "early"}], finish=None)])
    rest = sse_reply([gemini_parts([{"text": " late"}])])
    gate = threading.Event()
    fake.add(
        Reply(
            body=first.body + rest.body,
            headers=first.headers,
            gate=gate,
            gate_after=len(first.body),
        )
    )
    stream = model_for(fake).stream(ModelRequest(contents=(Content.user("hi"),)))
    assert next(stream).text == "early"  # would hang if the client buffered the body
    gate.set()
    assert [c.text for c in stream] == [" late", "early late"]
