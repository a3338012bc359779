"""FunctionAgent: keyword inputs, output key, errors as events."""

from __future__ import annotations

from typing import Any

import pytest

from phloem.agents import FunctionAgent, FunctionResult, InvocationContext
from phloem.agents.function_agent import MAX_OUTPUT_BYTES

pytestmark = pytest.mark.timeout(5)


def run(agent: FunctionAgent, **state: Any) -> list[Any]:
    return list(agent.run(InvocationContext(state=state)))


def test_inputs_arrive_as_keywords_and_the_result_goes_to_the_output_key() -> None:
    agent = FunctionAgent("add", "", lambda a, b: a + b, ["a", "b"], "sum")
    [event] = run(agent, a=2, b=3, other=9)
    assert event.actions.state_delta == {"sum": 5}
    assert event.author == "add"


def test_none_writes_nothing() -> None:
    [event] = run(FunctionAgent("nop", "", lambda: None, output_key="x"))
    assert event.actions.state_delta == {} and event.error is None


def test_an_exception_ends_the_agent_with_a_redacted_error_event() -> None:
    def boom() -> None:
        raise RuntimeError("password=hunter2 rejected")

    [event] = run(FunctionAgent("f", "", boom, output_key="x"))
    assert event.error is not None and event.error.kind == "agent_error"
    assert "hunter2" not in event.error.message and "RuntimeError" in event.error.message


def test_missing_inputs_are_an_error_not_a_type_error() -> None:
    [event] = run(FunctionAgent("f", "", lambda a: a, ["a"], "x"))
    assert event.error is not None and event.error.kind == "missing_input"


def test_input_keys_must_be_identifiers() -> None:
    with pytest.raises(ValueError, match="input_keys must be identifiers"):
        FunctionAgent("f", "", lambda **kw: 1, ["user:name"])
    with pytest.raises(ValueError, match="input_keys must be identifiers"):
        FunctionAgent("f", "", lambda **kw: 1, ["class"])


def test_a_function_result_can_speak_and_escalate() -> None:
    [event] = run(FunctionAgent("f", "", lambda: FunctionResult(1, "done", escalate=True), (), "x"))
    assert event.text == "done" and event.actions.escalate
    assert event.actions.state_delta == {"x": 1}


def test_output_must_be_json_encodable_and_at_most_max_output_bytes() -> None:
    [bad] = run(FunctionAgent("f", "", object, output_key="x"))
    assert bad.error is not None and bad.error.kind == "invalid_output"
    edge = "a" * (MAX_OUTPUT_BYTES - 2)  # JSON adds two quotes
    [ok] = run(FunctionAgent("f", "", lambda: edge, output_key="x"))
    assert ok.error is None
    [big] = run(FunctionAgent("f", "", lambda: edge + "a", output_key="x"))
    assert big.error is not None and "MAX_OUTPUT_BYTES" in big.error.message
