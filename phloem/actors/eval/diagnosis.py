"""Why a sample failed: expected against actual, turn by turn, within a budget.

A failed or errored sample carries a `Diagnosis` (`phloem.protocols.evalreport`): each
turn with a criterion below its threshold — its input, the expected and actual final
response, every criterion's score for that turn alone, and the trajectory as an aligned
diff (`scoring.align`, under the first `tool_trajectory` criterion's policies, else
`exact`) — with the criteria's thresholds and the first error with its kind.

Bounds: every text (input, response, a call) is cut to `MAX_DIAGNOSIS_TEXT_CHARS`;
a sample's diagnosis holds at most `MAX_DIAGNOSIS_CHARS` of text (turns and diff rows
past it are counted in `omitted_turns` / `omitted_steps`, never silently lost); one run
diagnoses at most `MAX_DIAGNOSED_SAMPLES` samples (later ones keep their error and
scores), so the report stays well under `MAX_REPORT_BYTES`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import msgspec

from phloem.actors.eval.scoring import TurnOutput, align, args_differ, score
from phloem.protocols.errors import ErrorValue
from phloem.protocols.evalcriteria import (
    CUSTOM,
    LLM_JUDGE,
    TOOL_TRAJECTORY,
    ArgsPolicy,
    Criteria,
)
from phloem.protocols.evalreport import CallStep, Diagnosis, TurnDiagnosis
from phloem.protocols.evalset import ToolCall, Turn

MAX_DIAGNOSIS_TEXT_CHARS = 1_000  # one text of a diagnosis (input, response, call), cut
MAX_DIAGNOSIS_CHARS = 8_000  # all the text of one sample's diagnosis; the rest is counted
MAX_DIAGNOSED_SAMPLES = 1_000  # samples one run diagnoses; later ones keep error and scores
ELLIPSIS = "…"


def cut(text: str, limit: int = MAX_DIAGNOSIS_TEXT_CHARS) -> str:
    """`text` if at most `limit` characters, else its first `limit - 1` and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def call_text(call: ToolCall) -> str:
    """`name({"arg": value, ...})`, the arguments as compact JSON with sorted keys."""
    args = msgspec.json.encode(call.args, order="sorted").decode()
    return cut(f"{call.name}({args})")


class Budget:
    """At most `limit` diagnosed samples in one run (thread-safe)."""

    def __init__(self, limit: int = MAX_DIAGNOSED_SAMPLES) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.used >= self.limit:
                return False
            self.used += 1
            return True


def diagnose(
    criteria: Criteria,
    turns: Sequence[Turn],
    outputs: Sequence[TurnOutput],
    error: ErrorValue | None = None,
    *,
    budget: int = MAX_DIAGNOSIS_CHARS,
) -> Diagnosis:
    """The diagnosis of one sample from the turns it completed (`outputs`, one per turn
    from the first) and, if it errored, what went wrong (the first error of the turn
    that failed); the first error is the earliest of these."""
    # the deterministic criteria: a judge and a custom scorer score the whole case only
    scored = [c for c in criteria.criteria if c.criterion not in (LLM_JUDGE, CUSTOM)]
    trajectory = next((c for c in scored if c.criterion == TOOL_TRAJECTORY), None)
    match = trajectory.match if trajectory is not None else "exact"
    args: ArgsPolicy = trajectory.args if trajectory is not None else "exact"
    first = next((o.error for o in outputs if o.error is not None), error)
    left = budget
    kept: list[TurnDiagnosis] = []
    omitted = 0
    for turn, out in zip(turns, outputs, strict=False):
        scores = {c.id: s for c in scored if (s := score(c, [turn], [out])) is not None}
        if all(scores[c.id] >= c.threshold for c in scored if c.id in scores):
            continue
        texts = [cut(turn.input), cut(out.response)]
        if turn.expected_response is not None:
            texts.append(cut(turn.expected_response))
        size = sum(len(t) for t in texts)
        if size > left:
            omitted += 1
            continue
        left -= size
        steps: list[CallStep] | None = None
        skipped = 0
        if turn.expected_trajectory is not None:
            steps = []
            for status, i, j in align(turn.expected_trajectory, out.tool_calls, match, args):
                want = None if i is None else turn.expected_trajectory[i]
                got = None if j is None else out.tool_calls[j]
                row = CallStep(
                    status,
                    None if want is None else call_text(want),
                    None if got is None else call_text(got),
                    args_differ(want, got, args)
                    if status == "mismatch" and want is not None and got is not None
                    else [],
                )
                cost = len(row.expected or "") + len(row.actual or "")
                if cost > left:
                    skipped += 1
                    continue
                left -= cost
                steps.append(row)
        kept.append(
            TurnDiagnosis(
                turn_id=turn.id,
                input=texts[0],
                actual_response=texts[1],
                expected_response=texts[2] if len(texts) > 2 else None,
                scores=scores,
                trajectory=steps,
                policy=f"{match}, args {args}" if steps is not None else "",
                omitted_steps=skipped,
            )
        )
    return Diagnosis(
        turns=kept,
        thresholds={c.id: c.threshold for c in criteria.criteria},
        error=first,
        omitted_turns=omitted,
    )
