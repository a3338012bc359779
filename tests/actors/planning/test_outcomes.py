"""The typed messages of a planning callback child: requests in, outcomes out."""

from __future__ import annotations

import msgspec
import pytest

from phloem.actors.planning import outcomes
from phloem.actors.planning.worker import (
    CallbackRequest,
    ExecuteCall,
    PlanCall,
    ReviewCall,
    check_outcome,
)
from phloem.protocols.jsonvalue import canonical_json
from phloem.protocols.plan import Step
from phloem.protocols.result import Complete, Continue, Ok

EVERY_OUTCOME: list[outcomes.Outcome] = [
    outcomes.OkOutcome({"a": [1, None]}),
    outcomes.CompleteOutcome("done"),
    outcomes.ContinueOutcome(),
    outcomes.ReplanOutcome({"id": "p"}),
    outcomes.FailOutcome({"why": "x"}),
    outcomes.ErrorOutcome("boom"),
    outcomes.InvalidResult("plan() must return ..."),
    outcomes.InvalidOutput("not JSON", of="ok"),
    outcomes.InvalidOutput("too big"),
    outcomes.CallbackRaised("ValueError", "bad"),
    outcomes.MemoryExceeded(),
]


@pytest.mark.parametrize("outcome", EVERY_OUTCOME)
def test_every_outcome_round_trips_as_canonical_json(outcome: outcomes.Outcome) -> None:
    data = outcomes.encode(outcome)
    assert data == canonical_json(msgspec.to_builtins(outcome))
    assert outcomes.decode(data) == outcome


def test_the_tag_names_the_outcome_and_anything_else_is_refused() -> None:
    assert outcomes.encode(outcomes.ContinueOutcome()) == b'{"tag":"continue"}'
    assert outcomes.MEMORY_EXCEEDED_JSON == b'{"tag":"memory_exceeded"}'
    for bad in (b'{"tag":"maybe"}', b'{"tag":"continue","extra":1}', b'{"value":1}', b"[]"):
        with pytest.raises(msgspec.ValidationError):
            outcomes.decode(bad)


def test_describe_gives_the_message_of_an_invalid_outcome_else_its_tag() -> None:
    assert outcomes.describe(outcomes.InvalidOutput("not JSON", of="ok")) == "not JSON"
    assert outcomes.describe(outcomes.ContinueOutcome()) == "continue"


def test_check_outcome_turns_callback_results_into_typed_outcomes() -> None:
    assert check_outcome("execute", Ok({"x": 1})) == outcomes.OkOutcome({"x": 1})
    assert check_outcome("review", Continue()) == outcomes.ContinueOutcome()
    assert check_outcome("review", Complete(3)) == outcomes.CompleteOutcome(3)
    invalid = check_outcome("execute", Continue())
    assert isinstance(invalid, outcomes.InvalidResult)
    bad_data = check_outcome("execute", Ok({1, 2}))
    assert isinstance(bad_data, outcomes.InvalidOutput) and bad_data.of == "ok"


@pytest.mark.parametrize(
    "call",
    [
        PlanCall(target=None, goal="g", context={}),
        ReviewCall(target=1, plan={"id": "p"}, step_id="s", observation={}, context={}),
        ExecuteCall(target=None, step=Step("s", "d", {"op": "x"}), context={}, config={"k": 1}),
    ],
)
def test_requests_round_trip_with_the_call_tagged_by_callback(
    call: PlanCall | ReviewCall | ExecuteCall,
) -> None:
    request = CallbackRequest("planner", "mod:Obj", call)
    data = canonical_json(request)
    assert msgspec.json.decode(data)["call"]["callback"] == call.__struct_config__.tag
    assert msgspec.json.decode(data, type=CallbackRequest) == request
