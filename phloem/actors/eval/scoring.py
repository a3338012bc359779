"""Deterministic criteria: exact response, ROUGE-1 response match, tool trajectory.

Each scorer takes the turns of one case and what one sample's run answered to each, and
returns a score in [0, 1], or None when no turn carries the expectation it needs (the
criterion is then `not_evaluated` for that case, never a pass).

- `exact_response`: matched turns / turns with an expected response, after
  normalization (`exact`, `trim`, `casefold_trim`).
- `response_match_score`: the mean ROUGE-1 F-measure with Porter stemming between the
  expected (reference) and actual (candidate) response, from the `rouge-score` package
  that ADK uses, so the numbers are ADK's.
- `tool_trajectory`: the mean over turns with an expected trajectory of 1.0 (match) or
  0.0. Match policies: `exact` (same length, position by position), `in_order` (expected
  is an ordered subsequence of actual: extra calls allowed), `any_order` (same count, any
  order), `subset` (every expected call matched by a distinct actual one, extras
  allowed). Argument policies: `exact`, `subset` (expected is a recursive JSON subset of
  actual), `ignored`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from phloem.protocols.errors import ErrorValue
from phloem.protocols.evalcriteria import (
    EXACT_RESPONSE,
    RESPONSE_MATCH,
    TOOL_TRAJECTORY,
    ArgsPolicy,
    Criterion,
    MatchPolicy,
    Normalization,
)
from phloem.protocols.evalset import ToolCall, Turn


@dataclass(frozen=True)
class TurnOutput:
    """What the agent did in one turn: its final text and the tool calls it made."""

    response: str
    tool_calls: tuple[ToolCall, ...] = ()
    intermediate: tuple[str, ...] = field(default=())
    error: ErrorValue | None = None  # the first error event of the turn's run


def normalize(text: str, how: Normalization) -> str:
    if how == "trim":
        return text.strip()
    if how == "casefold_trim":
        return text.strip().casefold()
    return text


def exact_response(
    turns: Sequence[Turn], outputs: Sequence[TurnOutput], how: Normalization
) -> float | None:
    pairs = [(t.expected_response, o.response) for t, o in zip(turns, outputs, strict=True)]
    expected = [(e, a) for e, a in pairs if e is not None]
    if not expected:
        return None
    hits = sum(1 for e, a in expected if normalize(e, how) == normalize(a, how))
    return hits / len(expected)


_scorer_lock = threading.Lock()
_scorer: Any = None


def rouge1_f(reference: str, candidate: str) -> float:
    """ROUGE-1 F-measure with Porter stemming (`rouge_score.rouge_scorer`), as ADK's
    `response_match_score` computes it."""
    global _scorer
    with _scorer_lock:
        if _scorer is None:
            from rouge_score import rouge_scorer

            _scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
        scorer = _scorer
    score = scorer.score(target=reference, prediction=candidate)
    return float(score["rouge1"].fmeasure)


def response_match(turns: Sequence[Turn], outputs: Sequence[TurnOutput]) -> float | None:
    scores = [
        rouge1_f(t.expected_response, o.response)
        for t, o in zip(turns, outputs, strict=True)
        if t.expected_response is not None
    ]
    return sum(scores) / len(scores) if scores else None


def json_subset(expected: Any, actual: Any) -> bool:
    """Whether `expected` is contained in `actual`: objects by key (recursively), lists
    element by element with equal length, anything else by equality."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and json_subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(json_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def call_matches(expected: ToolCall, actual: ToolCall, args: ArgsPolicy) -> bool:
    if expected.name != actual.name:
        return False
    if args == "ignored":
        return True
    if args == "subset":
        return json_subset(expected.args, actual.args)
    return json_subset(expected.args, actual.args) and json_subset(actual.args, expected.args)


def _max_matching(
    expected: Sequence[ToolCall], actual: Sequence[ToolCall], same: Callable[[int, int], bool]
) -> int:
    """Size of a maximum matching of expected to distinct actual calls (augmenting paths)."""
    return len(_matching(expected, actual, same))


def _matching(
    expected: Sequence[ToolCall], actual: Sequence[ToolCall], same: Callable[[int, int], bool]
) -> dict[int, int]:
    """A maximum matching of expected to distinct actual calls: actual index → expected."""
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in range(len(actual)):
            if j in seen or not same(i, j):
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        assign(i, set())
    return owner


def trajectory_matches(
    expected: Sequence[ToolCall],
    actual: Sequence[ToolCall],
    match: MatchPolicy,
    args: ArgsPolicy,
) -> bool:
    def same(i: int, j: int) -> bool:
        return call_matches(expected[i], actual[j], args)

    if match == "exact":
        return len(expected) == len(actual) and all(same(i, i) for i in range(len(expected)))
    if match == "in_order":
        j = 0
        for i in range(len(expected)):
            while j < len(actual) and not same(i, j):
                j += 1
            if j == len(actual):
                return False
            j += 1
        return True
    if match == "any_order" and len(expected) != len(actual):
        return False
    return _max_matching(expected, actual, same) == len(expected)


StepStatus = Literal["match", "mismatch", "missing", "extra"]
Step = tuple[StepStatus, int | None, int | None]  # status, expected index, actual index


def align(
    expected: Sequence[ToolCall],
    actual: Sequence[ToolCall],
    match: MatchPolicy,
    args: ArgsPolicy,
) -> list[Step]:
    """Expected and actual calls side by side, paired as `match` pairs them (with the
    same call comparison as `trajectory_matches`): `match` rows, `missing` (expected
    only), `extra` (actual only), and `mismatch` — an expected call with no partner next
    to the first unpaired actual call of the same name (its arguments differ)."""

    def same(i: int, j: int) -> bool:
        return call_matches(expected[i], actual[j], args)

    rows: list[Step] = []
    if match == "exact":
        for k in range(max(len(expected), len(actual))):
            if k >= len(actual):
                rows.append(("missing", k, None))
            elif k >= len(expected):
                rows.append(("extra", None, k))
            else:
                rows.append(("match" if same(k, k) else "mismatch", k, k))
        return rows
    if match == "in_order":
        j = 0
        for i in range(len(expected)):
            k = j
            while k < len(actual) and not same(i, k):
                k += 1
            if k == len(actual):
                rows.append(("missing", i, None))
                continue
            rows += [("extra", None, n) for n in range(j, k)]
            rows.append(("match", i, k))
            j = k + 1
        rows += [("extra", None, n) for n in range(j, len(actual))]
    else:
        owner = _matching(expected, actual, same)
        rows = [
            ("match", owner[j], j) if j in owner else ("extra", None, j) for j in range(len(actual))
        ]
        paired = set(owner.values())
        rows += [("missing", i, None) for i in range(len(expected)) if i not in paired]
    return _pair_by_name(rows, same, lambda i, j: expected[i].name == actual[j].name)


def _pair_by_name(
    rows: list[Step], same: Callable[[int, int], bool], names: Callable[[int, int], bool]
) -> list[Step]:
    """Each `missing` expected call next to the first `extra` actual call of its name
    that differs from it (an equal one is the same call out of place: both stay)."""
    out = list(rows)
    for row in rows:
        i = row[1]
        if row[0] != "missing" or i is None:
            continue
        k = next(
            (
                n
                for n, (status, _, j) in enumerate(out)
                if status == "extra" and j is not None and names(i, j) and not same(i, j)
            ),
            None,
        )
        if k is not None:
            out[k] = ("mismatch", i, out[k][2])
            out.remove(row)
    return out


def args_differ(expected: ToolCall, actual: ToolCall, args: ArgsPolicy) -> list[str]:
    """The argument names `args` compares differently in two calls (sorted): under
    `subset` those of `expected` absent or different in `actual`; under `exact` also
    those only `actual` has; none under `ignored`."""
    if args == "ignored":
        return []
    keys = set(expected.args) | (set(actual.args) if args == "exact" else set())
    out = []
    for key in keys:
        if key not in expected.args or key not in actual.args:
            out.append(key)
            continue
        e, a = expected.args[key], actual.args[key]
        ok = json_subset(e, a) and (args == "subset" or json_subset(a, e))
        if not ok:
            out.append(key)
    return sorted(out)


def tool_trajectory(
    turns: Sequence[Turn], outputs: Sequence[TurnOutput], match: MatchPolicy, args: ArgsPolicy
) -> float | None:
    scores = [
        1.0 if trajectory_matches(t.expected_trajectory, o.tool_calls, match, args) else 0.0
        for t, o in zip(turns, outputs, strict=True)
        if t.expected_trajectory is not None
    ]
    return sum(scores) / len(scores) if scores else None


def score(
    criterion: Criterion, turns: Sequence[Turn], outputs: Sequence[TurnOutput]
) -> float | None:
    """The score of one deterministic criterion for one sample (None: not evaluated)."""
    if criterion.criterion == EXACT_RESPONSE:
        return exact_response(turns, outputs, criterion.normalization)
    if criterion.criterion == RESPONSE_MATCH:
        return response_match(turns, outputs)
    if criterion.criterion == TOOL_TRAJECTORY:
        return tool_trajectory(turns, outputs, criterion.match, criterion.args)
    raise ValueError(f"{criterion.criterion} is not a deterministic criterion")
