"""Eval set and criteria files: phloem's v2, ADK's evalset (both casings), legacy
.test.json, test_config.json; strictness and size bounds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from phloem.protocols import evalcriteria as ec, evalset as es
from phloem.protocols.evalset import ToolCall
from tests.actors.eval.fixtures import (
    ADK_CAMEL,
    ADK_LEGACY,
    ADK_SNAKE,
    ADK_TEST_CONFIG,
    case,
    phloem_set,
    write_json,
)
from tests.helpers import raises_kind

INVALID = "eval_set_invalid"


def parse(doc: object) -> es.EvalSet:
    return es.parse_evalset(json.dumps(doc))


def test_phloem_v2_set_is_read_with_defaults_for_turn_ids() -> None:
    doc = phloem_set(
        [
            case(
                "c1",
                {"input": "hi", "expected_response": "hello"},
                {
                    "id": "t2",
                    "input": "add",
                    "expected_trajectory": [{"name": "add", "args": {"a": 1}}],
                    "metadata": {"tag": "x"},
                },
            )
        ]
    )
    doc["metadata"] = {"team": "a"}
    got = parse(doc)
    assert got.format == "phloem" and got.id == "set" and got.version == "1"
    assert [t.id for t in got.cases[0].turns] == ["turn-1", "t2"]
    assert got.cases[0].turns[0].expected_trajectory is None
    assert got.cases[0].turns[1].expected_trajectory == [ToolCall("add", {"a": 1})]
    assert got.metadata == {"team": "a"}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(extra=1), "$: unknown field 'extra'"),
        (lambda d: d.pop("version"), "$: missing field 'version'"),
        (lambda d: d.update(schema_version=3), "$.schema_version must be 2"),
        (lambda d: d["cases"][0].update(colour="red"), "$.cases[0]: unknown field 'colour'"),
        (
            lambda d: d["cases"][0]["turns"][0].pop("input"),
            "$.cases[0].turns[0]: missing field 'input'",
        ),
        (lambda d: d["cases"].append(dict(d["cases"][0])), "$.cases: id 'c1' appears twice"),
        (lambda d: d["cases"][0].update(turns=[]), "$.cases[0].turns must not be empty"),
        (
            lambda d: d["cases"][0]["turns"][0].update(expected_trajectory=[{"args": {}}]),
            "$.cases[0].turns[0].expected_trajectory[0]: missing field 'name'",
        ),
    ],
)
def test_phloem_v2_rejects_what_it_does_not_know(mutate: object, message: str) -> None:
    doc = phloem_set([case("c1", {"input": "hi"})])
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(es.PhloemError) as info:
        parse(doc)
    assert info.value.kind == INVALID
    assert info.value.message == message


def test_a_key_given_twice_is_rejected() -> None:
    text = '{"schema_version": 2, "id": "a", "id": "b", "version": "1", "cases": []}'
    assert raises_kind(es.parse_evalset, text) == INVALID


def test_case_and_turn_counts_are_bounded() -> None:
    ok = phloem_set([case(f"c{i}", {"input": "x"}) for i in range(es.MAX_CASES)])
    assert len(parse(ok).cases) == es.MAX_CASES
    too_many = phloem_set([case(f"c{i}", {"input": "x"}) for i in range(es.MAX_CASES + 1)])
    assert raises_kind(parse, too_many) == INVALID
    turns = [{"input": "x", "id": f"t{i}"} for i in range(es.MAX_TURNS)]
    assert len(parse(phloem_set([case("c", *turns)])).cases[0].turns) == es.MAX_TURNS
    turns.append({"input": "x", "id": "last"})
    with pytest.raises(es.PhloemError, match="at most 1000 allowed"):
        parse(phloem_set([case("c", *turns)]))


def test_files_over_16_mib_are_refused_reading_at_most_one_byte_more(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    body = json.dumps(phloem_set([case("c", {"input": "x"})]))
    path.write_text(body + " " * (es.MAX_EVALSET_BYTES - len(body)))
    assert es.read_evalset(path).id == "set"  # exactly at the limit
    with path.open("a") as f:
        f.write(" ")
    with pytest.raises(es.PhloemError, match=r"larger than 16777216 bytes$"):
        es.read_evalset(path)


def test_a_directory_or_fifo_is_not_an_eval_set(tmp_path: Path) -> None:
    assert raises_kind(es.read_evalset, tmp_path) == INVALID
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert raises_kind(es.read_evalset, fifo) == INVALID


def test_adk_evalset_snake_and_camel_case_read_the_same(tmp_path: Path) -> None:
    snake = es.read_evalset(write_json(tmp_path / "home.evalset.json", ADK_SNAKE))
    camel = es.read_evalset(write_json(tmp_path / "home2.evalset.json", ADK_CAMEL))
    assert snake == camel
    assert "evalSetId" in ADK_CAMEL and "evalCases" in ADK_CAMEL
    assert snake.format == "adk_evalset" and snake.id == "home_automation"
    first, second = snake.cases
    turn = first.turns[0]
    assert (turn.id, turn.input, turn.expected_response) == (
        "inv-1",
        "Turn on the lamp",
        "The lamp is on.",
    )
    assert turn.expected_trajectory == [ToolCall("set_device", {"device": "lamp", "on": True})]
    assert first.session_input is not None and first.session_input.state == {"room": "den"}
    assert first.unsupported == []
    assert [t.id for t in second.turns] == ["inv-2", "inv-3"]
    assert second.turns[0].expected_trajectory == []
    # read but not evaluated: named, never dropped
    assert second.unsupported == ["final_session_state", "intermediate_data.tool_responses"]


def test_adk_evalset_text_parts_join_with_newlines_and_thoughts_are_skipped() -> None:
    doc = json.loads(json.dumps(ADK_SNAKE))
    doc["eval_cases"][0]["conversation"][0]["final_response"]["parts"] = [
        {"text": "thinking", "thought": True},
        {"text": "a"},
        {"text": "b"},
    ]
    assert parse(doc).cases[0].turns[0].expected_response == "a\nb"


def test_adk_evalset_rejects_a_key_in_both_casings_and_unknown_keys_where_adk_does() -> None:
    doc = json.loads(json.dumps(ADK_SNAKE))
    doc["evalSetId"] = "again"
    with pytest.raises(es.PhloemError, match="given twice"):
        parse(doc)
    doc = json.loads(json.dumps(ADK_SNAKE))
    doc["eval_cases"][0]["conversation"][0]["surprise"] = 1  # ADK's Invocation forbids extras
    with pytest.raises(
        es.PhloemError, match=r"\$\.eval_cases\[0\]\.conversation\[0\]: unknown field 'surprise'"
    ):
        parse(doc)


def test_adk_nulls_and_every_genai_part_field_are_read() -> None:
    doc = json.loads(json.dumps(ADK_SNAKE))
    invocation = doc["eval_cases"][0]["conversation"][0]
    part = invocation["user_content"]["parts"][0]
    for field in sorted(es._ADK_PART - {"text"}):
        part[field] = None
    invocation.update(duration=None, model_duration=None, tool_duration=None, rubrics=None)
    invocation["app_details"] = None
    invocation["intermediate_data"]["tool_uses"][0].update(partial_args=None, will_continue=None)
    doc["eval_cases"][0].update(conversation_scenario=None, rubrics=None)
    doc["eval_cases"][0]["session_input"]["session_id"] = None
    doc["description"] = None
    got = parse(doc)
    assert got.cases[0].turns[0].input == "Turn on the lamp" and got.cases[0].unsupported == []
    assert got.cases[0].session_input is not None and got.cases[0].session_input.session_id is None


def test_adk_invocation_events_give_the_trajectory_and_intermediate_texts() -> None:
    doc = json.loads(json.dumps(ADK_SNAKE))
    events = [
        {"author": "home", "content": {"parts": [{"text": "on it"}], "role": "model"}},
        {
            "author": "home",
            "content": {
                "role": "model",
                "parts": [{"functionCall": {"name": "set_device", "args": {"device": "lamp"}}}],
            },
            "invocationIndex": 3,  # a UI-only field ADK ignores
        },
        {"author": "tool", "content": {"parts": [{"function_response": {"name": "set_device"}}]}},
        {"author": "home", "content": None},
    ]
    doc["eval_cases"][0]["conversation"][0]["intermediate_data"] = {"invocationEvents": events}
    got = parse(doc).cases[0]
    turn = got.turns[0]
    assert turn.expected_trajectory == [es.ToolCall("set_device", {"device": "lamp"})]
    assert turn.expected_intermediate_responses == ["on it"]
    assert got.unsupported == ["intermediate_data.tool_responses"]


def test_adk_extra_fields_where_adk_allows_them_are_named_not_refused() -> None:
    doc = json.loads(json.dumps(ADK_SNAKE))
    doc["eval_cases"][0]["surprise"] = 1  # EvalCase: extra="allow"
    doc["eval_cases"][0]["session_input"]["tenant"] = "t1"  # SessionInput: extra="allow"
    doc["eval_cases"][0]["quiet"] = None  # a null extra says nothing
    doc["producer"] = "a tool"  # EvalSet: extra fields ignored by ADK
    got = parse(doc)
    assert got.cases[0].unsupported == [
        "eval_set.producer",
        "eval_case.surprise",
        "session_input.tenant",
    ]
    assert got.cases[1].unsupported[0] == "eval_set.producer"


def test_adk_conversation_scenario_and_rubrics_are_not_evaluated_by_name() -> None:
    doc = {
        "eval_set_id": "sim",
        "eval_cases": [
            {"eval_id": "scenario", "conversation_scenario": {"starting_prompt": "hi"}},
            {
                "eval_id": "rubric",
                "conversation": ADK_SNAKE["eval_cases"][0]["conversation"],
                "rubrics": [{"rubric_id": "r1"}],
            },
        ],
    }
    got = parse(doc)
    assert got.cases[0].turns == [] and got.cases[0].unsupported == ["conversation_scenario"]
    assert got.cases[1].unsupported == ["rubrics"]


def test_legacy_test_json_is_one_conversation(tmp_path: Path) -> None:
    got = es.read_evalset(write_json(tmp_path / "home.test.json", ADK_LEGACY))
    assert got.format == "adk_test" and got.id == "home"
    (only,) = got.cases
    assert [t.input for t in only.turns] == ["Turn on the lamp", "Is the fan on?"]
    assert only.turns[0].expected_trajectory == [
        ToolCall("set_device", {"device": "lamp", "on": True})
    ]
    assert only.turns[1].expected_response == "The fan is off."
    bad = [{"query": "x", "extra": 1}]
    assert raises_kind(parse, bad) == INVALID


def test_summary_counts_what_validate_prints() -> None:
    got = es.summary(parse(ADK_SNAKE))
    assert got == {
        "format": "adk_evalset",
        "id": "home_automation",
        "version": "",
        "cases": 2,
        "turns": 3,
        "with_expected_response": 3,
        "with_expected_trajectory": 3,
        "unsupported": ["final_session_state", "intermediate_data.tool_responses"],
    }


# --- criteria ----------------------------------------------------------------------------


def test_adk_test_config_threshold_and_object_forms() -> None:
    got = ec.parse_criteria(json.dumps(ADK_TEST_CONFIG))
    assert got.source == "adk"
    assert [(c.id, c.criterion, c.threshold, c.match) for c in got.criteria] == [
        ("tool_trajectory_avg_score", "tool_trajectory", 1.0, "exact"),
        ("response_match_score", "response_match_score", 0.8, "exact"),
    ]
    objects = {
        "criteria": {
            "tool_trajectory_avg_score": {"threshold": 0.5, "match_type": "IN_ORDER"},
            "response_match_score": {"threshold": 0.7},
            "final_response_match_v2": 0.8,
            "safety_v1": {"threshold": 0.9},
        }
    }
    got = ec.parse_criteria(json.dumps(objects))
    assert [(c.id, c.threshold, c.match) for c in got.criteria] == [
        ("tool_trajectory_avg_score", 0.5, "in_order"),
        ("response_match_score", 0.7, "exact"),
    ]
    assert got.not_evaluated == ["final_response_match_v2", "safety_v1"]


@pytest.mark.parametrize(
    ("adk", "ours"), [("EXACT", "exact"), ("IN_ORDER", "in_order"), ("ANY_ORDER", "subset")]
)
def test_adk_match_types_keep_adk_meaning(adk: str, ours: str) -> None:
    doc = {"criteria": {"tool_trajectory_avg_score": {"threshold": 1.0, "match_type": adk}}}
    assert ec.parse_criteria(json.dumps(doc)).criteria[0].match == ours


@pytest.mark.parametrize(
    ("value", "ours"),
    [
        (0, "exact"),
        (1, "in_order"),
        (2, "subset"),
        ("in-order", "in_order"),
        (" any order ", "subset"),
    ],
)
def test_adk_match_types_as_adks_validator_reads_them(value: object, ours: str) -> None:
    doc = {"criteria": {"tool_trajectory_avg_score": {"threshold": 1.0, "matchType": value}}}
    assert ec.parse_criteria(json.dumps(doc)).criteria[0].match == ours


@pytest.mark.parametrize("value", [3, True, "SOMETIMES", None])
def test_an_adk_match_type_adk_refuses_is_refused(value: object) -> None:
    doc = {"criteria": {"tool_trajectory_avg_score": {"threshold": 1.0, "match_type": value}}}
    if value is None:  # a null is ADK's default
        assert ec.parse_criteria(json.dumps(doc)).criteria[0].match == "exact"
        return
    with pytest.raises(ec.PhloemError, match="match_type must be one of") as info:
        ec.parse_criteria(json.dumps(doc))
    assert info.value.kind == "eval_criteria_invalid"


def test_adk_eval_config_sections_and_options_phloem_does_not_run_are_named() -> None:
    doc = {
        "criteria": {
            "tool_trajectory_avg_score": {
                "threshold": 1.0,
                "ignoreArgs": True,
                "includeIntermediateResponsesInFinal": False,
                "judge_model_options": None,
            },
            "response_match_score": {
                "threshold": 0.5,
                "include_intermediate_responses_in_final": True,
                "weight": 2,
            },
            "rubric_based_final_response_quality_v1": {"threshold": 0.5, "rubrics": []},
        },
        "customMetrics": {"m": {"code_config": {"name": "x.y"}}},
        "user_simulator_config": {"model": "m", "max_allowed_invocations": 3},
        "live_model_config": None,
    }
    got = ec.parse_criteria(json.dumps(doc))
    trajectory, response = got.criteria
    assert (trajectory.args, trajectory.match, response.threshold) == ("ignored", "exact", 0.5)
    assert got.not_evaluated == [
        "custom_metrics",
        "user_simulator_config",
        "response_match_score.include_intermediate_responses_in_final",
        "response_match_score.weight",
        "rubric_based_final_response_quality_v1",
    ]
    assert ec.parse_criteria('{"criteria": {}}').criteria == []  # ADK allows none
    with pytest.raises(ec.PhloemError, match="given twice"):
        ec.parse_criteria('{"criteria": {}, "customMetrics": null, "custom_metrics": null}')
    with pytest.raises(ec.PhloemError, match="ignore_args must be true or false"):
        ec.parse_criteria(
            '{"criteria": {"tool_trajectory_avg_score": {"threshold": 1, "ignore_args": 1}}}'
        )


def test_defaults_are_adks() -> None:
    got = ec.default_criteria()
    assert {c.id: c.threshold for c in got.criteria} == {
        "tool_trajectory_avg_score": 1.0,
        "response_match_score": 0.8,
    }


def test_phloem_criteria_file() -> None:
    doc = {
        "schema_version": 1,
        "criteria": [
            {"id": "a", "criterion": "exact_response", "config": {"normalization": "trim"}},
            {
                "criterion": "tool_trajectory",
                "threshold": 0.5,
                "config": {"match": "any_order", "args": "subset"},
            },
            {
                "id": "j",
                "criterion": "llm_judge",
                "config": {
                    "rubric_id": "helpful",
                    "rubric_version": "2",
                    "rubric": "Be helpful",
                    "provider": "flash",
                    "samples": 3,
                    "deadline_s": 5,
                },
            },
        ],
    }
    got = ec.parse_criteria(json.dumps(doc))
    a, t, j = got.criteria
    assert (a.id, a.normalization, a.threshold) == ("a", "trim", 1.0)
    assert (t.id, t.match, t.args, t.threshold) == ("tool_trajectory", "any_order", "subset", 0.5)
    assert (j.kind, j.samples, j.deadline_s, j.provider) == ("judge", 3, 5.0, "flash")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"criterion": "bleu"}, "criterion must be one of"),
        ({"criterion": "exact_response", "config": {"normalization": "lower"}}, "normalization"),
        ({"criterion": "exact_response", "threshold": 1.5}, "threshold must be between 0 and 1"),
        ({"criterion": "tool_trajectory", "config": {"order": "x"}}, "unknown field 'order'"),
        ({"criterion": "llm_judge", "config": {"rubric_id": "r"}}, "rubric_version is required"),
        (
            {
                "criterion": "llm_judge",
                "config": {
                    "rubric_id": "r",
                    "rubric_version": "1",
                    "rubric": "x",
                    "provider": "p",
                    "samples": 11,
                },
            },
            "samples must be between 1 and 10",
        ),
    ],
)
def test_phloem_criteria_are_strict(entry: dict[str, object], message: str) -> None:
    doc = {"schema_version": 1, "criteria": [entry]}
    with pytest.raises(ec.PhloemError, match=message) as info:
        ec.parse_criteria(json.dumps(doc))
    assert info.value.kind == "eval_criteria_invalid"


def test_criteria_files_are_at_most_1_mib(tmp_path: Path) -> None:
    path = tmp_path / "test_config.json"
    body = json.dumps(ADK_TEST_CONFIG)
    path.write_text(body + " " * (ec.MAX_CRITERIA_BYTES - len(body)))
    assert len(ec.read_criteria(path).criteria) == 2
    with path.open("a") as f:
        f.write(" ")
    assert raises_kind(ec.read_criteria, path) == "eval_criteria_invalid"
