"""BuiltInPlanner and PlanReActPlanner: how they shape requests and split answers."""

from __future__ import annotations

import msgspec

from phloem.models.request_planners import (
    ACTION_TAG,
    FINAL_ANSWER_TAG,
    PLANNING_TAG,
    REASONING_TAG,
    REPLANNING_TAG,
    BuiltInPlanner,
    PlanReActPlanner,
    RequestPlanner,
)
from phloem.protocols.content import (
    Content,
    FunctionCall,
    GenerateConfig,
    ModelRequest,
    ModelResponse,
    Part,
    ThinkingConfig,
)

HISTORY = (
    Content.user("q"),
    Content(
        role="model", parts=(Part.from_thought("old plan", signature=b"s"), Part.from_text("a"))
    ),
)


def test_built_in_planner_sets_thinking_config_over_the_generate_config() -> None:
    planner = BuiltInPlanner(ThinkingConfig(include_thoughts=True, thinking_budget=256))
    request = ModelRequest(
        contents=HISTORY,
        system_instruction="sys",
        config=GenerateConfig(
            max_output_tokens=9, thinking_config=ThinkingConfig(thinking_budget=0)
        ),
    )
    built = planner.build_request(request)
    assert built.config.thinking_config == ThinkingConfig(
        include_thoughts=True, thinking_budget=256
    )
    assert built.config.max_output_tokens == 9
    assert built.system_instruction == "sys"  # no instruction of its own
    assert isinstance(planner, RequestPlanner)


def test_both_planners_clear_thought_flags_on_resent_history() -> None:
    for planner in (BuiltInPlanner(ThinkingConfig()), PlanReActPlanner()):
        built = planner.build_request(ModelRequest(contents=HISTORY))
        part = built.contents[1].parts[0]
        assert (part.text, part.thought, part.thought_signature) == ("old plan", False, b"s")
        assert built.contents[0] == HISTORY[0]


def test_built_in_planner_leaves_answers_unchanged() -> None:
    response = ModelResponse.from_parts([Part.from_text(f"{PLANNING_TAG} x")])
    assert BuiltInPlanner(ThinkingConfig()).process_response(response) is response


def test_plan_react_appends_its_instruction_after_the_system_instruction() -> None:
    built = PlanReActPlanner().build_request(ModelRequest(system_instruction="You are terse."))
    assert built.system_instruction is not None
    assert built.system_instruction.startswith("You are terse.\n\n")
    for tag in (PLANNING_TAG, REASONING_TAG, ACTION_TAG, REPLANNING_TAG, FINAL_ANSWER_TAG):
        assert tag in built.system_instruction
    alone = PlanReActPlanner().build_request(ModelRequest())
    assert alone.system_instruction is not None and alone.system_instruction.startswith("Work")


def split(*parts: Part) -> tuple[Part, ...]:
    out = PlanReActPlanner().process_planning_response(parts)
    assert out is not None
    return out


def test_final_answer_is_split_at_the_last_tag() -> None:
    text = f"{PLANNING_TAG}1. look{REASONING_TAG}done{FINAL_ANSWER_TAG}draft{FINAL_ANSWER_TAG} 42"
    assert split(Part.from_text(text)) == (
        Part.from_thought(f"1. lookdone{FINAL_ANSWER_TAG}draft".replace(FINAL_ANSWER_TAG, "")),
        Part.from_text("42"),
    )


def test_final_answer_without_reasoning_or_answer_text() -> None:
    assert split(Part.from_text(f"{FINAL_ANSWER_TAG}only answer")) == (
        Part.from_text("only answer"),
    )
    assert split(Part.from_text(f"{REASONING_TAG}why{FINAL_ANSWER_TAG}")) == (
        Part.from_thought("why"),
    )


def test_tagged_openers_become_thoughts_and_other_text_passes() -> None:
    for tag in (PLANNING_TAG, REASONING_TAG, ACTION_TAG, REPLANNING_TAG):
        assert split(Part.from_text(f"{tag} step one")) == (Part.from_thought("step one"),)
    plain = Part.from_text(f"not at the start {PLANNING_TAG}")
    assert split(plain) == (plain,)


def test_first_call_group_is_kept_and_everything_after_dropped() -> None:
    a = Part.from_function_call("a", {"x": 1})
    b = Part.from_function_call("b")
    after = Part.from_function_call("late")
    out = split(
        Part.from_text(f"{REASONING_TAG}need a and b"),
        a,
        b,
        Part.from_text("trailing text"),
        after,
    )
    assert out == (Part.from_thought("need a and b"), a, b)


def test_calls_with_empty_names_are_dropped() -> None:
    # content validation forbids empty names; a planner still copes with one built around it
    empty_named = FunctionCall(name="x")
    msgspec.structs.force_setattr(empty_named, "name", "")
    real = Part.from_function_call("real")
    out = split(Part(function_call=empty_named), real, Part(function_call=empty_named), real)
    assert out == (real, real)


def test_process_response_replaces_parts_and_keeps_metadata() -> None:
    response = ModelResponse(
        content=Content(
            role="model", parts=(Part.from_text(f"{PLANNING_TAG}p{FINAL_ANSWER_TAG}A"),)
        ),
        finish_reason="STOP",
        model_version="v1",
    )
    processed = PlanReActPlanner().process_response(response)
    assert processed.text == "A"
    assert processed.thoughts == "p"
    assert (processed.finish_reason, processed.model_version) == ("STOP", "v1")
    empty = ModelResponse()
    assert PlanReActPlanner().process_response(empty) is empty
