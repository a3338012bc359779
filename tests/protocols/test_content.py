"""The provider-neutral content shape: validation, helpers and JSON round trips."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from phloem.protocols.content import (
    Content,
    FunctionDeclaration,
    GenerateConfig,
    ModelRequest,
    ModelResponse,
    Part,
    ThinkingConfig,
    Usage,
    decode_request,
    decode_response,
    encode_json,
    fill_call_ids,
)


def sample_request() -> ModelRequest:
    return ModelRequest(
        contents=(
            Content.user("what is the weather?"),
            Content(
                role="model",
                parts=(
                    Part.from_thought("need the tool", signature=b"\x00sig"),
                    Part.from_function_call("weather", {"city": "Oslo"}, id="c1"),
                ),
            ),
            Content(
                role="user",
                parts=(
                    Part.from_function_response("weather", {"temp": 3}, id="c1"),
                    Part.from_bytes(b"\x89PNG", "image/png"),
                ),
            ),
        ),
        system_instruction="be brief",
        tools=(
            FunctionDeclaration(
                name="weather",
                description="current weather",
                parameters={"type": "object", "properties": {"city": {"type": "string"}}},
            ),
        ),
        config=GenerateConfig(
            max_output_tokens=100,
            temperature=0.5,
            thinking_config=ThinkingConfig(include_thoughts=True, thinking_budget=64),
            forced_function="weather",
        ),
    )


def test_request_round_trips_through_json_including_bytes() -> None:
    request = sample_request()
    assert decode_request(encode_json(request)) == request


def test_response_round_trips_through_json_and_exposes_helpers() -> None:
    response = ModelResponse(
        content=Content(
            role="model",
            parts=(
                Part.from_thought("hmm"),
                Part.from_text("it is "),
                Part.from_text("cold"),
                Part.from_function_call("log", {"x": 1}),
            ),
        ),
        finish_reason="STOP",
        usage=Usage(input_tokens=3, output_tokens=4, thoughts_tokens=1, total_tokens=8),
        model_version="m-1",
    )
    again = decode_response(encode_json(response))
    assert again == response
    assert again.text == "it is cold"
    assert again.thoughts == "hmm"
    assert [c.name for c in again.function_calls] == ["log"]


def test_usage_adds_field_by_field() -> None:
    total = Usage(input_tokens=1, output_tokens=2, total_tokens=3) + Usage(
        input_tokens=10, thoughts_tokens=5, total_tokens=15
    )
    assert total == Usage(input_tokens=11, output_tokens=2, thoughts_tokens=5, total_tokens=18)


def test_part_with_two_payloads_is_rejected() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        Part(text="a", inline_data=Part.from_bytes(b"", "a/b").inline_data)


def test_thought_flag_without_text_is_rejected() -> None:
    call = Part.from_function_call("f").function_call
    with pytest.raises(ValueError, match=r"^part.thought requires text$"):
        Part(function_call=call, thought=True)


def test_unknown_role_is_rejected_also_when_decoding() -> None:
    with pytest.raises(ValueError, match=r"content.role"):
        Content(role="assistant")
    with pytest.raises(msgspec.ValidationError, match=r"content.role"):
        msgspec.json.decode(b'{"role":"system","parts":[]}', type=Content)


@pytest.mark.parametrize("name", ["", "1abc", "has space", "a" * 65, "dotted.name"])
def test_function_declaration_rejects_names_providers_refuse(name: str) -> None:
    with pytest.raises(ValueError, match=r"function_declaration.name"):
        FunctionDeclaration(name=name)


def test_function_declaration_accepts_a_64_character_name() -> None:
    assert FunctionDeclaration(name="a" * 64).name == "a" * 64


def test_parameters_must_be_an_object_schema() -> None:
    with pytest.raises(ValueError, match="object schema"):
        FunctionDeclaration(name="f", parameters={"type": "string"})


def test_generate_config_validates_each_field_by_name() -> None:
    with pytest.raises(
        ValueError, match=r"^invalid_argument: config.max_output_tokens must be at least 1$"
    ):
        GenerateConfig(max_output_tokens=0)
    with pytest.raises(ValueError, match=r"config.temperature"):
        GenerateConfig(temperature=2.01)
    assert GenerateConfig(temperature=2.0).temperature == 2.0
    with pytest.raises(ValueError, match="thinking_budget must be at least -1"):
        ThinkingConfig(thinking_budget=-2)
    assert ThinkingConfig(thinking_budget=-1).thinking_budget == -1
    with pytest.raises(ValueError, match="forced_function"):
        GenerateConfig(forced_function="f", tool_choice="none")


def test_request_requires_forced_function_to_be_declared_and_tools_unique() -> None:
    with pytest.raises(ValueError, match="not a declared tool"):
        ModelRequest(config=GenerateConfig(forced_function="ping"))
    with pytest.raises(ValueError, match="unique names"):
        ModelRequest(tools=(FunctionDeclaration(name="a"), FunctionDeclaration(name="a")))
    with pytest.raises(ValueError, match="tool_choice required"):
        ModelRequest(config=GenerateConfig(tool_choice="required"))


def test_empty_response_has_empty_text_and_no_calls() -> None:
    response = ModelResponse()
    assert response.text == ""
    assert response.function_calls == ()
    assert response.parts == ()


call_ids = st.one_of(st.none(), st.sampled_from(["a", "b", "phloem-call-0", "phloem-call-1", ""]))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.one_of(call_ids.map(lambda i: ("call", i)), st.just(("text", None))), max_size=8)
)
def test_fill_call_ids_gives_unique_ids_keeps_first_ones_and_is_deterministic(
    spec: list[tuple[str, str | None]],
) -> None:
    parts = [
        Part.from_function_call("f", id=i or None) if kind == "call" else Part.from_text("t")
        for kind, i in spec
    ]
    filled = fill_call_ids(parts)
    assert filled == fill_call_ids(parts)
    assert [p.text for p in filled] == [p.text for p in parts]
    ids = [p.function_call.id for p in filled if p.function_call]
    assert all(ids) and len(set(ids)) == len(ids)
    seen: set[str] = set()
    for before, after in zip(parts, filled, strict=True):
        if before.function_call and before.function_call.id and before.function_call.id not in seen:
            assert after.function_call and after.function_call.id == before.function_call.id
            seen.add(before.function_call.id)


texts = st.text(max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
parts_strategy = st.one_of(
    texts.map(Part.from_text),
    st.tuples(texts, st.none() | st.binary(max_size=8)).map(lambda t: Part.from_thought(*t)),
    st.tuples(st.dictionaries(texts, json_values, max_size=3), st.none() | texts).map(
        lambda t: Part.from_function_call("f", t[0], id=t[1])
    ),
    st.dictionaries(texts, json_values, max_size=3).map(
        lambda r: Part.from_function_response("f", r)
    ),
    st.binary(max_size=16).map(lambda b: Part.from_bytes(b, "image/png")),
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "model"]), st.lists(parts_strategy, max_size=4)),
        max_size=4,
    )
)
def test_any_request_round_trips_through_json(turns: list[tuple[str, list[Part]]]) -> None:
    request = ModelRequest(contents=tuple(Content(role=r, parts=tuple(p)) for r, p in turns))
    assert decode_request(encode_json(request)) == request
