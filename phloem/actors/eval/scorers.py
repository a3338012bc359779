"""Custom eval scorers: trusted code an application registers, never named by a file.

A scorer is `score(case, outputs) -> float | None`: the `EvalCase` (its turns and their
expectations) and what one sample's run answered to each turn (`TurnOutput`s), returning
a score in [0, 1], or None when the case has nothing for it to score (the criterion is
then `not_evaluated`, never a pass). Scorers are registered by the tree's configuration
(`[eval.scorers] NAME = "module:function"`, imported like `[components]`) or, embedded,
passed to `EvalEngine(scorers={...})`; an eval's criteria file only names one
(`{"criterion": "custom", "config": {"scorer": NAME}}`). A scorer that raises or answers
anything else fails the sample as `scorer_failed` (an `error`, never a score).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from phloem.actors.eval.scoring import TurnOutput
from phloem.base.settings import load_component, one_line
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.evalcriteria import CUSTOM, Criteria, Criterion
from phloem.protocols.evalset import EvalCase
from phloem.protocols.secrets import redact

Scorer: TypeAlias = Callable[[EvalCase, Sequence[TurnOutput]], float | None]
MAX_FAILURE_CHARS = 300


def load_scorers(paths: Mapping[str, str]) -> dict[str, Scorer]:
    """The configured scorers, imported (`config_invalid` for one that is not callable)."""
    out: dict[str, Scorer] = {}
    for name, path in paths.items():
        fn = load_component(path, what=f"[eval.scorers] {name}")
        if not callable(fn):
            raise PhloemError(
                ErrorKind.CONFIG_INVALID, f"[eval.scorers] {name}: {path!r} is not callable"
            )
        out[name] = fn
    return out


def check_scorers(criteria: Criteria, scorers: Mapping[str, Scorer]) -> None:
    """Every custom criterion names a registered scorer (`eval_criteria_invalid`)."""
    for c in criteria.criteria:
        if c.criterion == CUSTOM and c.scorer not in scorers:
            known = ", ".join(sorted(scorers)) or "none"
            raise PhloemError(
                ErrorKind.EVAL_CRITERIA_INVALID,
                f"criterion {c.id!r}: no scorer named {c.scorer!r} is registered"
                f" (registered: {known})",
            )


def custom_score(
    criterion: Criterion, scorer: Scorer, case: EvalCase, outputs: Sequence[TurnOutput]
) -> float | None:
    """The scorer's answer, checked; `scorer_failed` for anything but [0, 1] or None."""
    try:
        value = scorer(case, tuple(outputs))
    except Exception as exc:
        cause = one_line(redact(f"{type(exc).__name__}: {exc}"), MAX_FAILURE_CHARS)
        raise PhloemError(
            ErrorKind.SCORER_FAILED, f"scorer {criterion.scorer!r}: {cause}"
        ) from None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise PhloemError(
            ErrorKind.SCORER_FAILED,
            f"scorer {criterion.scorer!r} answered {type(value).__name__}, not a number",
        )
    if not 0.0 <= value <= 1.0:
        raise PhloemError(
            ErrorKind.SCORER_FAILED,
            f"scorer {criterion.scorer!r} answered {value:g}, outside 0 .. 1",
        )
    return float(value)
