"""The plan schema, secret pruning, options and the strict result codec."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from phloem.protocols import jsonvalue as jv, plan as pl, result as rs, secrets as sec
from phloem.protocols.plan import PlanError, Step
from phloem.protocols.result import PlanningResult, ResultError
from tests.helpers import raises_kind

pytestmark = pytest.mark.timeout(30)


def doc(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema_version": 1,
        "id": "release-plan",
        "revision": 0,
        "goal": {"task": "report"},
        "steps": [{"id": "s1", "description": "look", "action": {"kind": "tool"}, "metadata": {}}],
        "metadata": {},
    }
    base.update(over)
    return base


# --- round trip and pruning (their "plan codec round trip and secret pruning") ---------


def test_plan_round_trips_through_encode_and_decode_with_secrets_pruned() -> None:
    plan = pl.Plan.new(
        "release-plan",
        0,
        {"task": "report", "api_key": "sk-1"},
        [
            Step(
                "lookup",
                "Look up the release",
                {"kind": "tool", "arguments": {"release": "0.3"}, "password": "x"},
                {"Authorization": "Bearer abc", "max_tokens": 100},
            )
        ],
        {"planner": "application", "client_secret": "s"},
    )
    assert plan.goal == {"task": "report"}
    assert plan.steps[0].action == {"kind": "tool", "arguments": {"release": "0.3"}}
    assert plan.steps[0].metadata == {"max_tokens": 100}
    assert plan.metadata == {"planner": "application"}
    data = pl.encode(plan)
    assert pl.decode(data) == plan
    assert json.loads(data)["schema_version"] == 1
    assert pl.encode(pl.decode(data)) == data


def test_pruning_keeps_token_counts_but_removes_credential_tokens() -> None:
    usage = {
        "max_tokens": 1024,
        "input_tokens": 7,
        "output_tokens": None,
        "promptTokenCount": 3,
        "input_tokens_details": {"cached_tokens": 1, "session_token": "t"},
        "access_token": "a",
        "token": "b",
        "id_token": 5,
        "refresh_tokens": ["r"],
        "x-api-key": "k",
        "Set-Cookie": "c",
        "otp": "123",
        "pin": 1234,
        "spinner": "kept",
        "nested": [{"private_key": "p", "ok": True}],
    }
    assert sec.prune_secrets(usage) == {
        "max_tokens": 1024,
        "input_tokens": 7,
        "output_tokens": None,
        "promptTokenCount": 3,
        "input_tokens_details": {"cached_tokens": 1},
        "spinner": "kept",
        "nested": [{"ok": True}],
    }


def test_decoding_canonicalises_a_single_alternative_spelling() -> None:
    d = doc()
    del d["schema_version"]
    d["schemaVersion"] = 1
    d["ID"] = d.pop("id")
    plan = pl.decode(json.dumps(d))
    assert plan.schema_version == 1 and plan.id == "release-plan"
    assert json.loads(pl.encode(plan))["id"] == "release-plan"


# --- rejections -------------------------------------------------------------------------


def test_opaque_code_such_as_a_function_is_rejected_as_non_json() -> None:
    assert raises_kind(pl.decode, doc(goal={"f": lambda: 1})) == "invalid_plan_json"
    steps = [{"id": "s", "description": "d", "action": {"run": print}}]
    assert raises_kind(pl.encode, doc(steps=steps)) == "invalid_plan_json"


@pytest.mark.parametrize(
    "value",
    [b"bytes", {1, 2}, float("nan"), float("inf"), object(), {1: "int key"}, "\ud800"],
)
def test_non_json_values_are_rejected(value: Any) -> None:
    assert raises_kind(pl.decode, doc(goal={"v": value})) == "invalid_plan_json"


def test_duplicate_step_ids_are_rejected() -> None:
    steps = [
        {"id": "a", "description": "x", "action": {}},
        {"id": "a", "description": "y", "action": {}},
    ]
    with pytest.raises(PlanError) as info:
        pl.decode(doc(steps=steps))
    assert info.value.kind == "duplicate_plan_step_id"
    assert info.value.details == {"index": 1, "step_id": "a"}


def test_unknown_step_field_is_rejected_with_its_index() -> None:
    steps = [
        {"id": "a", "description": "x", "action": {}},
        {"id": "b", "description": "y", "action": {}, "code": "rm -rf /"},
    ]
    with pytest.raises(PlanError) as info:
        pl.decode(doc(steps=steps))
    assert info.value.kind == "unknown_plan_step_fields"
    assert info.value.details == {"index": 1, "fields": ["code"]}


def test_unknown_plan_field_is_rejected() -> None:
    assert raises_kind(pl.decode, doc(extra=1)) == "unknown_plan_fields"


def test_a_field_given_under_two_spellings_is_rejected() -> None:
    assert raises_kind(pl.decode, doc(ID="other")) == "duplicate_plan_field"
    assert raises_kind(pl.decode, doc(schemaVersion=1)) == "duplicate_plan_field"
    step = {"id": "a", "Id": "a", "description": "x", "action": {}}
    assert raises_kind(pl.decode, doc(steps=[step])) == "duplicate_plan_field"


def test_a_key_repeated_in_json_text_is_rejected() -> None:
    step = '{"id":"a","description":"d","action":{}}'
    text = '{"id":"p","id":"q","revision":0,"goal":1,"steps":[' + step + "]}"
    assert raises_kind(pl.decode, text) == "duplicate_plan_field"
    nested = '{"id":"p","revision":0,"goal":{"a":1,"a":2},"steps":[' + step + "]}"
    assert raises_kind(pl.decode, nested) == "invalid_plan_json"


def test_invalid_utf8_and_non_json_text_are_rejected() -> None:
    good = json.dumps(doc()).encode()
    assert raises_kind(pl.decode, good.replace(b"report", b"rep\xffort")) == "invalid_plan_json"
    assert raises_kind(pl.decode, good.replace(b'"report"', b"NaN")) == "invalid_plan_json"
    assert raises_kind(pl.decode, b"{") == "invalid_plan_json"


def test_missing_and_empty_fields_are_rejected() -> None:
    d = doc()
    del d["goal"]
    assert raises_kind(pl.decode, d) == "missing_plan_field"
    assert raises_kind(pl.decode, doc(id="")) == "invalid_plan_field"
    assert raises_kind(pl.decode, doc(steps=[])) == "invalid_plan_field"
    assert raises_kind(pl.decode, doc(revision=-1)) == "invalid_plan_field"
    assert raises_kind(pl.decode, doc(revision=True)) == "invalid_plan_field"
    assert raises_kind(pl.decode, doc(schema_version=2)) == "unsupported_plan_schema_version"
    bad_steps: list[Any] = [
        [{"id": "", "description": "x", "action": {}}],
        [{"id": "a", "description": "", "action": {}}],
        [{"id": "a", "description": "x", "action": "rm"}],
        ["not a step"],
    ]
    for steps in bad_steps:
        assert raises_kind(pl.decode, doc(steps=steps)) == "invalid_plan_step"
    assert raises_kind(pl.decode, doc(steps=[{"id": "a", "action": {}}])) == "missing_plan_field"


def test_nesting_deeper_than_the_limit_is_rejected_and_at_the_limit_accepted() -> None:
    def nest(n: int) -> Any:
        v: Any = 1
        for _ in range(n):
            v = [v]
        return v

    assert pl.decode(doc(goal=nest(jv.MAX_JSON_DEPTH - 1))).goal == nest(jv.MAX_JSON_DEPTH - 1)
    assert raises_kind(pl.decode, doc(goal=nest(jv.MAX_JSON_DEPTH + 1))) == "invalid_plan_json"


def test_plan_size_budget_is_checked_against_canonical_json() -> None:
    plan = pl.decode(doc())
    pl.check_initial_plan(plan, {"task": "report"}, plan.size())
    with pytest.raises(PlanError) as info:
        pl.check_initial_plan(plan, {"task": "report"}, plan.size() - 1)
    assert info.value.kind == "plan_size_limit_exceeded"


def test_replacement_identity_is_strict() -> None:
    current = pl.decode(doc())
    ok = pl.decode(doc(revision=1))
    pl.check_replacement_plan(current, ok, 10_000)
    for bad in (
        doc(revision=2),
        doc(revision=0),
        doc(id="other", revision=1),
        doc(goal=2, revision=1),
    ):
        with pytest.raises(PlanError) as info:
            pl.check_replacement_plan(current, pl.decode(bad), 10_000)
        assert info.value.kind == "invalid_plan_identity"


# --- options ----------------------------------------------------------------------------


def test_options_default_and_validate_their_ranges() -> None:
    opts = pl.parse_options({})
    assert (opts.max_steps, opts.max_replans, opts.timeout_ms, opts.callback_timeout_ms) == (
        16,
        3,
        60_000,
        10_000,
    )
    assert opts.max_memory_bytes == 256 * 1024 * 1024 and opts.max_plan_bytes == 1024 * 1024
    assert pl.parse_options({"max_replans": 0}).max_replans == 0
    assert pl.parse_options({"max_memory_bytes": 16 * 1024 * 1024}).max_memory_bytes > 0
    cases = {
        "max_steps": 0,
        "max_replans": -1,
        "timeout_ms": 0,
        "callback_timeout_ms": 0,
        "max_memory_bytes": 16 * 1024 * 1024 - 1,
        "max_plan_bytes": 0,
    }
    for name, value in cases.items():
        with pytest.raises(PlanError, match=rf"^invalid_planning_options: {name} must be between "):
            pl.parse_options({name: value})
    with pytest.raises(PlanError, match=r"unknown option 'max_heap_words'; use max_memory_bytes"):
        pl.parse_options({"max_heap_words": 500_000})
    with pytest.raises(PlanError, match=r"max_steps must be an int"):
        pl.parse_options({"max_steps": "3"})
    big = {"k": "x" * pl.MAX_RESULT_METADATA_BYTES}
    with pytest.raises(PlanError, match=r"result_metadata must be <="):
        pl.parse_options({"result_metadata": big})
    assert pl.parse_options({"result_metadata": {"a": 1, "password": "p"}}).result_metadata == {
        "a": 1
    }


# --- results ----------------------------------------------------------------------------


def sample_result() -> PlanningResult:
    plan = pl.decode(doc())
    obs = (
        rs.Observation("release-plan", 0, "s1", 1, "ok", output={"n": 1}),
        rs.Observation(
            "release-plan", 0, "s1", 2, "error", error=ResultError("executor_failed", "boom")
        ),
    )
    return PlanningResult(
        status="failed",
        plan=plan,
        steps_executed=2,
        replans=0,
        duration_ms=5,
        observations=obs,
        result=None,
        error=ResultError("max_steps_exceeded", limit=2),
        metadata={"run": "42"},
    )


def test_result_json_round_trips_through_the_strict_decoder() -> None:
    result = sample_result()
    data = rs.encode_result(result)
    assert rs.decode_result(data) == result
    assert rs.encode_result(rs.decode_result(data)) == data
    obj = json.loads(data)
    assert set(obj) == {
        "result_schema_version",
        "status",
        "plan",
        "steps_executed",
        "replans",
        "duration_ms",
        "observations",
        "result",
        "error",
        "metadata",
    }
    assert obj["observations"][0] == {
        "plan_id": "release-plan",
        "revision": 0,
        "step_id": "s1",
        "attempt": 1,
        "status": "ok",
        "output": {"n": 1},
    }


def test_result_decoder_rejects_unknown_fields_versions_and_inconsistency() -> None:
    good = json.loads(rs.encode_result(sample_result()))

    def bad(mutate: Any) -> str:
        obj = json.loads(json.dumps(good))
        mutate(obj)
        return raises_kind(rs.decode_result, json.dumps(obj))

    assert bad(lambda o: o.update(extra=1)) == "invalid_planning_result"
    assert bad(lambda o: o.pop("metadata")) == "invalid_planning_result"
    assert bad(lambda o: o.update(result_schema_version=2)) == "invalid_planning_result"
    assert bad(lambda o: o.update(status="done")) == "invalid_planning_result"
    assert bad(lambda o: o.update(result=1)) == "invalid_planning_result"
    assert bad(lambda o: o.update(error=None)) == "invalid_planning_result"
    assert bad(lambda o: o.update(status="completed")) == "invalid_planning_result"
    assert bad(lambda o: o.update(status="cancelled")) == "invalid_planning_result"
    assert bad(lambda o: o["error"].update(extra=1)) == "invalid_planning_result"
    assert bad(lambda o: o["observations"][0].update(error={"kind": "x"})) == (
        "invalid_planning_result"
    )
    assert bad(lambda o: o["observations"][1].pop("error")) == "invalid_planning_result"
    assert bad(lambda o: o["plan"].update(code="x")) == "invalid_planning_result"
    assert raises_kind(rs.decode_result, b'{"status":"completed","status":"failed"}') == (
        "invalid_planning_result"
    )


# --- property: round trip ---------------------------------------------------------------

_keys = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=8
).filter(lambda k: not sec.is_secret_key(k, "x"))
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10)


@st.composite
def plans(draw: st.DrawFn) -> pl.Plan:
    step_ids = draw(st.lists(_ids, min_size=1, max_size=5, unique=True))
    steps = [
        Step(
            sid,
            draw(_ids),
            draw(st.dictionaries(_keys, _json, max_size=3)),
            draw(st.dictionaries(_keys, _json, max_size=3)),
        )
        for sid in step_ids
    ]
    return pl.Plan.new(
        draw(_ids),
        draw(st.integers(0, 1000)),
        draw(_json),
        steps,
        draw(st.dictionaries(_keys, _json, max_size=3)),
    )


@settings(max_examples=80, deadline=None)
@given(plans())
def test_any_valid_plan_round_trips_through_the_codec(plan: pl.Plan) -> None:
    data = pl.encode(plan)
    again = pl.decode(data)
    assert again == plan
    assert pl.encode(again) == data


@st.composite
def results(draw: st.DrawFn) -> PlanningResult:
    plan = draw(st.none() | plans())
    status = draw(st.sampled_from(["completed", "failed", "cancelled"]))
    errors = st.builds(
        ResultError,
        st.text(min_size=1, max_size=8),
        st.just(msgspec.UNSET) | _json,
        st.just(msgspec.UNSET) | st.integers(0, 10**6),
    )
    observations = st.lists(
        st.builds(
            lambda i, ok, out, err: (
                rs.Observation("p", 0, f"s{i}", i, "ok", output=out)
                if ok
                else rs.Observation("p", 0, f"s{i}", i, "error", error=err)
            ),
            st.integers(1, 50),
            st.booleans(),
            _json,
            errors,
        ),
        max_size=4,
    )
    if status == "completed":
        result, error = draw(_json), None
    elif status == "cancelled":
        result, error = None, ResultError("cancelled", draw(_json))
    else:
        result, error = None, draw(errors)
    return PlanningResult(
        status=status,
        plan=plan,
        steps_executed=draw(st.integers(0, 100)),
        replans=draw(st.integers(0, 10)),
        duration_ms=draw(st.integers(0, 10**7)),
        observations=tuple(draw(observations)),
        result=result,
        error=error,
        metadata=draw(st.dictionaries(_keys, _json, max_size=3)),
    )


@settings(max_examples=60, deadline=None)
@given(results())
def test_any_consistent_result_round_trips_through_the_strict_decoder(
    result: PlanningResult,
) -> None:
    data = rs.encode_result(result)
    assert rs.decode_result(data) == result
    assert rs.encode_result(rs.decode_result(data)) == data


@pytest.mark.parametrize(
    ("fields", "kind", "said"),
    [
        ({"id": "", "description": "d", "action": {}}, "invalid_plan_step", "id must be"),
        ({"id": "s", "description": "", "action": {}}, "invalid_plan_step", "description"),
        ({"id": "s", "description": "d", "action": []}, "invalid_plan_step", "action must"),
        (
            {"id": "s", "description": "d", "action": {}, "metadata": "x"},
            "invalid_plan_step",
            "metadata must",
        ),
        (
            {"id": "s", "description": "d", "action": {"f": object()}},
            "invalid_plan_json",
            "$.action.f",
        ),
    ],
)
def test_the_step_constructor_validates_as_the_plan_does(
    fields: dict[str, Any], kind: str, said: str
) -> None:
    with pytest.raises(PlanError) as info:
        Step(**fields)
    assert info.value.kind == kind and said in info.value.message


def test_a_constructed_step_is_canonical_and_pruned() -> None:
    step = Step("s1", "fetch", {"tool": "read", "api_key": "sk-abc"}, {"note": 1})
    assert step.action == {"tool": "read"} and step.metadata == {"note": 1}
    assert pl.Plan.new("p", 1, "goal", [step]).steps == (step,)
