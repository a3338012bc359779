"""Eval diagnosis: the aligned trajectory diff under every match and args policy, the
per-turn scores against thresholds, the first error, and every bound at its edge."""

from __future__ import annotations

import pytest

from phloem.actors.eval import diagnosis as dg
from phloem.actors.eval.scoring import TurnOutput, align, args_differ, trajectory_matches
from phloem.protocols.errors import ErrorValue
from phloem.protocols.evalcriteria import Criteria, Criterion
from phloem.protocols.evalset import ToolCall, Turn

A1 = ToolCall("a", {"x": 1})
A2 = ToolCall("a", {"x": 2})
B = ToolCall("b", {"y": 1, "z": 2})
B_SUB = ToolCall("b", {"y": 1})
C = ToolCall("c")


@pytest.mark.parametrize(
    ("match", "args", "expected", "actual", "rows"),
    [
        ("exact", "exact", [A1, B], [A1, B], [("match", 0, 0), ("match", 1, 1)]),
        ("exact", "exact", [A1, B], [A2], [("mismatch", 0, 0), ("missing", 1, None)]),
        ("exact", "exact", [A1], [A1, C], [("match", 0, 0), ("extra", None, 1)]),
        ("exact", "ignored", [A1], [A2], [("match", 0, 0)]),
        # in_order: extras between matches, a call not found is missing
        (
            "in_order",
            "exact",
            [A1, B],
            [C, A1, C, B],
            [("extra", None, 0), ("match", 0, 1), ("extra", None, 2), ("match", 1, 3)],
        ),
        (  # the same call out of place: not a mismatch, it stays extra and missing
            "in_order",
            "exact",
            [B, A1],
            [A1, B],
            [("extra", None, 0), ("match", 0, 1), ("missing", 1, None)],
        ),
        ("in_order", "exact", [C], [A1], [("missing", 0, None), ("extra", None, 0)]),
        # any_order / subset: paired by a maximum matching, in actual order
        ("any_order", "exact", [B, A1], [A1, B], [("match", 1, 0), ("match", 0, 1)]),
        ("subset", "subset", [B_SUB], [C, B], [("extra", None, 0), ("match", 0, 1)]),
        ("subset", "exact", [B_SUB], [C, B], [("extra", None, 0), ("mismatch", 0, 1)]),
        ("any_order", "exact", [A1, A2], [A2], [("match", 1, 0), ("missing", 0, None)]),
    ],
)
def test_align_pairs_calls_as_the_match_policy_does(
    match: str, args: str, expected: list[ToolCall], actual: list[ToolCall], rows: list[object]
) -> None:
    got = align(expected, actual, match, args)  # type: ignore[arg-type]
    assert got == rows
    # the diff agrees with the score: all matched (extras allowed where the policy allows)
    allowed = {"match", "extra"} if match in ("in_order", "subset") else {"match"}
    ok = all(r[0] in allowed for r in got)
    assert ok == trajectory_matches(expected, actual, match, args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "expected", "actual", "differs"),
    [
        ("exact", B, ToolCall("b", {"y": 1, "z": 3}), ["z"]),
        ("exact", B_SUB, B, ["z"]),  # only the actual call has z: exact compares it
        ("subset", B_SUB, B, []),
        ("subset", B, B_SUB, ["z"]),
        ("subset", ToolCall("b", {"y": True}), ToolCall("b", {"y": 1}), ["y"]),  # no bool == 1
        ("ignored", A1, A2, []),
    ],
)
def test_args_differ_names_what_the_args_policy_compares_differently(
    args: str, expected: ToolCall, actual: ToolCall, differs: list[str]
) -> None:
    assert args_differ(expected, actual, args) == differs  # type: ignore[arg-type]


CRITERIA = Criteria(
    [
        Criterion("tools", "tool_trajectory", 1.0, match="in_order"),
        Criterion("rouge", "response_match_score", 0.8),
    ]
)


def test_only_turns_below_a_threshold_are_diagnosed_with_their_scores() -> None:
    good = Turn("t1", "hi", expected_response="hello there")
    bad = Turn("t2", "lamp?", expected_response="The lamp is off.", expected_trajectory=[A1])
    outputs = [
        TurnOutput("hello there"),
        TurnOutput("The lamp is on.", (C, A2), error=ErrorValue(kind="tool_failed", message="x")),
    ]
    got = dg.diagnose(CRITERIA, [good, bad], outputs)
    [turn] = got.turns
    assert turn.turn_id == "t2" and turn.input == "lamp?"
    assert (turn.expected_response, turn.actual_response) == ("The lamp is off.", "The lamp is on.")
    assert turn.scores == {"tools": 0.0, "rouge": 0.75}
    assert turn.policy == "in_order, args exact"
    assert [(s.status, s.expected, s.actual, s.differs) for s in turn.trajectory or []] == [
        ("extra", None, "c({})", []),
        ("mismatch", 'a({"x":1})', 'a({"x":2})', ["x"]),
    ]
    assert got.thresholds == {"tools": 1.0, "rouge": 0.8}
    assert got.error == ErrorValue(kind="tool_failed", message="x")  # the first error event


def test_the_first_error_is_the_earliest() -> None:
    turn = Turn("t", "in", expected_response="x")
    late = ErrorValue(kind="agent_error", message="failed turn")
    assert dg.diagnose(CRITERIA, [turn], [], late).error == late
    early = ErrorValue(kind="tool_failed", message="turn before")
    got = dg.diagnose(CRITERIA, [turn, turn], [TurnOutput("y", error=early)], late)
    assert got.error == early


@pytest.mark.parametrize(
    ("length", "kept"),
    [
        (dg.MAX_DIAGNOSIS_TEXT_CHARS, dg.MAX_DIAGNOSIS_TEXT_CHARS),
        (dg.MAX_DIAGNOSIS_TEXT_CHARS + 1, None),
    ],
)
def test_each_text_is_cut_at_its_limit(length: int, kept: int | None) -> None:
    text = "x" * length
    got = dg.cut(text)
    if kept is not None:
        assert got == text
    else:
        assert len(got) == dg.MAX_DIAGNOSIS_TEXT_CHARS and got.endswith(dg.ELLIPSIS)
    call = dg.call_text(ToolCall("f", {"s": text}))
    assert len(call) <= dg.MAX_DIAGNOSIS_TEXT_CHARS


def _turn_cost(turn: Turn, out: TurnOutput) -> int:
    return len(turn.input) + len(out.response) + len(turn.expected_response or "")


@pytest.mark.parametrize("over", [0, 1])
def test_the_diagnosis_budget_keeps_what_fits_and_counts_the_rest(over: int) -> None:
    turn = Turn("t", "in", expected_response="want", expected_trajectory=[A1, B])
    out = TurnOutput("got", (A2, C))
    full = dg.diagnose(CRITERIA, [turn], [out]).turns[0].trajectory or []
    assert [s.status for s in full] == ["missing", "mismatch", "extra"]
    rows = sum(len(s.expected or "") + len(s.actual or "") for s in full)
    budget = _turn_cost(turn, out) + rows - over  # exactly everything, or one character less
    [kept] = dg.diagnose(CRITERIA, [turn], [out], budget=budget).turns
    assert (kept.trajectory or []) == (full if not over else full[:-1])
    assert kept.omitted_steps == over


@pytest.mark.parametrize("over", [0, 1])
def test_a_turn_past_the_budget_is_counted_not_kept(over: int) -> None:
    turn = Turn("t", "in", expected_response="want")
    out = TurnOutput("got")
    got = dg.diagnose(CRITERIA, [turn, turn], [out, out], budget=2 * _turn_cost(turn, out) - over)
    assert (len(got.turns), got.omitted_turns) == ((2, 0) if not over else (1, 1))


def test_diagnosed_samples_per_run_stop_at_the_limit() -> None:
    budget = dg.Budget()
    assert budget.limit == dg.MAX_DIAGNOSED_SAMPLES
    assert all(budget.take() for _ in range(dg.MAX_DIAGNOSED_SAMPLES))  # exactly the limit
    assert not budget.take()  # one over
