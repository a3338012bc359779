"""The deterministic criteria: exact response, ROUGE-1 (equal to rouge-score's) and
every trajectory match and argument policy; no expectation is never a pass."""

from __future__ import annotations

import pytest
from rouge_score import rouge_scorer

from phloem.actors.eval import scoring
from phloem.actors.eval.scoring import TurnOutput, trajectory_matches
from phloem.protocols.evalcriteria import Criterion
from phloem.protocols.evalset import ToolCall, Turn

A1 = ToolCall("a", {"x": 1})
A2 = ToolCall("a", {"x": 2})
B = ToolCall("b", {"y": {"z": [1, 2]}})
C = ToolCall("c")


def turn(expected: str | None = None, trajectory: list[ToolCall] | None = None) -> Turn:
    return Turn("t", "in", expected_response=expected, expected_trajectory=trajectory)


@pytest.mark.parametrize(
    ("how", "expected", "actual", "score"),
    [
        ("exact", "Hello", "Hello", 1.0),
        ("exact", "Hello", "Hello ", 0.0),
        ("trim", "Hello", "  Hello\n", 1.0),
        ("trim", "Hello", "hello", 0.0),
        ("casefold_trim", "Straße", " STRASSE ", 1.0),
    ],
)
def test_exact_response_normalizations(how: str, expected: str, actual: str, score: float) -> None:
    c = Criterion("e", "exact_response", normalization=how)  # type: ignore[arg-type]
    assert scoring.score(c, [turn(expected)], [TurnOutput(actual)]) == score


def test_exact_response_scores_matched_over_expected_turns_and_skips_the_rest() -> None:
    c = Criterion("e", "exact_response")
    turns = [turn("a"), turn(None), turn("c"), turn("d")]
    outputs = [TurnOutput("a"), TurnOutput("anything"), TurnOutput("x"), TurnOutput("d")]
    assert scoring.score(c, turns, outputs) == pytest.approx(2 / 3)


def test_no_expectation_is_not_evaluated_for_every_criterion() -> None:
    turns, outputs = [turn()], [TurnOutput("whatever", (A1,))]
    for c in (
        Criterion("e", "exact_response"),
        Criterion("r", "response_match_score"),
        Criterion("t", "tool_trajectory"),
    ):
        assert scoring.score(c, turns, outputs) is None


PAIRS = [
    ("The cat sat on the mat.", "The cat sat on the mat."),
    ("The cats are running in the park", "A cat runs through parks"),
    ("It is 4 degrees Celsius in Oslo.", "Oslo: 4 degrees, quite cold."),
    ("", "something"),
    ("Numbers 1, 2 and 3!", "numbers one two three"),
    ("completely different", "nothing shared here"),
]


@pytest.mark.parametrize(("reference", "candidate"), PAIRS)
def test_rouge1_equals_rouge_score_with_stemming(reference: str, candidate: str) -> None:
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    expected = scorer.score(reference, candidate)["rouge1"].fmeasure
    assert scoring.rouge1_f(reference, candidate) == expected


def test_response_match_score_is_the_mean_over_turns() -> None:
    c = Criterion("r", "response_match_score", threshold=0.8)
    turns = [turn(PAIRS[0][0]), turn(PAIRS[1][0])]
    outputs = [TurnOutput(PAIRS[0][1]), TurnOutput(PAIRS[1][1])]
    expected = (1.0 + scoring.rouge1_f(PAIRS[1][0], PAIRS[1][1])) / 2
    assert scoring.score(c, turns, outputs) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("match", "expected", "actual", "ok"),
    [
        ("exact", [A1, B], [A1, B], True),
        ("exact", [A1, B], [B, A1], False),
        ("exact", [A1], [A1, C], False),
        ("exact", [], [], True),
        ("exact", [], [C], False),
        ("in_order", [A1, B], [C, A1, C, B], True),
        ("in_order", [A1, B], [B, A1], False),
        ("in_order", [A1, A1], [A1], False),
        ("in_order", [], [C], True),
        ("any_order", [A1, B], [B, A1], True),
        ("any_order", [A1, B], [B, A1, C], False),
        ("any_order", [A1, A1], [A1, A2], False),
        ("subset", [A1, B], [C, B, A1], True),
        ("subset", [A1, A1], [A1, C], False),
        ("subset", [A1, A1], [A1, A1, C], True),
        ("subset", [A2], [A1], False),
    ],
)
def test_trajectory_match_policies(
    match: str, expected: list[ToolCall], actual: list[ToolCall], ok: bool
) -> None:
    assert trajectory_matches(expected, actual, match, "exact") is ok  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "expected", "actual", "ok"),
    [
        ("exact", {"x": 1}, {"x": 1}, True),
        ("exact", {"x": 1}, {"x": 1, "y": 2}, False),
        ("exact", {"x": True}, {"x": 1}, False),
        ("subset", {"x": 1}, {"x": 1, "y": 2}, True),
        ("subset", {"o": {"a": 1}}, {"o": {"a": 1, "b": 2}}, True),
        ("subset", {"o": {"a": 1, "c": 3}}, {"o": {"a": 1, "b": 2}}, False),
        ("subset", {"l": [{"a": 1}]}, {"l": [{"a": 1, "b": 2}]}, True),
        ("subset", {"l": [1]}, {"l": [1, 2]}, False),
        ("ignored", {"x": 1}, {"x": 2}, True),
    ],
)
def test_argument_policies(args: str, expected: dict, actual: dict, ok: bool) -> None:  # type: ignore[type-arg]
    got = trajectory_matches([ToolCall("f", expected)], [ToolCall("f", actual)], "exact", args)  # type: ignore[arg-type]
    assert got is ok
    # a different name never matches, whatever the argument policy
    assert not trajectory_matches([ToolCall("f", expected)], [ToolCall("g", actual)], "exact", args)  # type: ignore[arg-type]


def test_tool_trajectory_is_the_mean_of_per_turn_matches() -> None:
    c = Criterion("t", "tool_trajectory", match="in_order")
    turns = [turn(None, [A1]), turn(None, [B]), turn(None, None)]
    outputs = [TurnOutput("", (A1, C)), TurnOutput("", (C,)), TurnOutput("", (A1,))]
    assert scoring.score(c, turns, outputs) == 0.5
