"""Eval methods of `phloem.Client` (and `tree.client()`) and `AsyncClient`.

`run_eval(evalset, agent=..., criteria=..., samples=..., on_progress=...) -> EvalReport`
reads the eval set (a path in any supported format, or an `EvalSet`) and its criteria (a
path to phloem's criteria file or ADK's `test_config.json`, a `Criteria`, or None: a
`test_config.json` beside the eval set file, else ADK's defaults), runs it in the daemon's
`eval` service against the agent registered under `agent`, calls `on_progress` with an
`EvalProgress` per finished case, and returns the report — compared with `baseline` (a
saved JSON report, a path or an `EvalReport`) when one is given. Closing the client (or
Ctrl-C out of the call) cancels the eval and every case run it started.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from phloem.actors.eval.baseline import check_tolerances, compare, read_baseline, with_baseline
from phloem.actors.eval.options import EvalOptions, check_options
from phloem.actors.eval.protocol import (
    CancelEval,
    EvalProgress,
    EvalStarted,
    EvalStreamItem,
    StartEval,
)
from phloem.client.base import AsyncClientBase, ClientBase
from phloem.client.runs import afollow_run, follow_run
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.evalcriteria import Criteria, default_criteria, read_criteria
from phloem.protocols.evalreport import EvalReport
from phloem.protocols.evalset import EvalSet, read_evalset

SERVICE = "eval/service"
ADK_CONFIG_NAME = "test_config.json"
EVENT_WINDOW = CreditWindow(256, 32 * 1024 * 1024)
STREAM_SLACK_S = 30.0  # beyond the eval's own deadlines, how long the client waits

EvalSetInput = str | os.PathLike[str] | EvalSet
CriteriaInput = str | os.PathLike[str] | Criteria | None
BaselineInput = str | os.PathLike[str] | EvalReport | None


def load_evalset(evalset: EvalSetInput) -> EvalSet:
    if isinstance(evalset, EvalSet):
        return evalset
    return read_evalset(evalset)


def load_criteria(criteria: CriteriaInput, evalset: EvalSetInput) -> Criteria:
    """The criteria given, else ADK's `test_config.json` beside the eval set file, else
    ADK's defaults."""
    if isinstance(criteria, Criteria):
        return criteria
    if criteria is not None:
        return read_criteria(criteria)
    if not isinstance(evalset, EvalSet):
        beside = Path(evalset).parent / ADK_CONFIG_NAME
        if beside.is_file():
            return read_criteria(beside)
    return default_criteria()


NOT_PASSING = ("failed", "partial", "error")


def select_cases(
    evalset: EvalSet,
    patterns: Sequence[str] = (),
    rerun: EvalReport | None = None,
) -> EvalSet:
    """`evalset` with only the cases whose id matches one of `patterns` (shell globs,
    `fnmatch` rules, case-sensitive) and, with `rerun` (a saved report of this set),
    that did not pass in it (failed, partial or error). Neither given: the set as it
    is. Nothing left: `eval_options_invalid` saying why."""
    cases = list(evalset.cases)
    if patterns:
        for pattern in patterns:
            if not any(fnmatch.fnmatchcase(c.id, pattern) for c in evalset.cases):
                raise PhloemError(
                    ErrorKind.EVAL_OPTIONS_INVALID,
                    f"--case {pattern!r} matches no case of eval set {evalset.id!r}",
                )
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]
    if rerun is not None:
        if rerun.eval_set_id != evalset.id:
            raise PhloemError(
                ErrorKind.EVAL_OPTIONS_INVALID,
                f"the report to re-run is of eval set {rerun.eval_set_id!r}, not {evalset.id!r}",
            )
        failed = {c.id for c in rerun.cases if c.status in NOT_PASSING}
        cases = [c for c in cases if c.id in failed]
        if not cases:
            raise PhloemError(
                ErrorKind.EVAL_OPTIONS_INVALID,
                "nothing to re-run: no case of the report failed"
                + (" among those --case selects" if patterns else ""),
            )
    if len(cases) == len(evalset.cases):
        return evalset
    return msgspec.structs.replace(evalset, cases=cases)


def build_options(options: EvalOptions | Mapping[str, Any] | None, **overrides: Any) -> EvalOptions:
    base = options if isinstance(options, EvalOptions) else EvalOptions(**dict(options or {}))
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return msgspec.structs.replace(base, **given) if given else base
    except TypeError as exc:
        raise PhloemError(ErrorKind.EVAL_OPTIONS_INVALID, str(exc)) from None


def _request(
    evalset: EvalSetInput,
    agent: str,
    criteria: CriteriaInput,
    options: EvalOptions | Mapping[str, Any] | None,
    samples: int | None,
    concurrency: int | None,
) -> StartEval:
    if not isinstance(agent, str):
        raise TypeError("agent must be the name of a registered agent")
    doc = load_evalset(evalset)
    crit = load_criteria(criteria, evalset)
    opts = check_options(
        build_options(options, samples=samples, concurrency=concurrency), len(doc.cases)
    )
    return StartEval(doc, agent, crit, opts)


def load_baseline(
    baseline: BaselineInput,
    max_pass_rate_drop: float,
    metric_tolerances: Mapping[str, float] | None,
) -> EvalReport | None:
    """The baseline report (read now, before the run, so a bad one fails fast)."""
    check_tolerances(max_pass_rate_drop, metric_tolerances)
    if baseline is None or isinstance(baseline, EvalReport):
        return baseline
    return read_baseline(baseline)


def _finish(
    report: EvalReport,
    before: EvalReport | None,
    max_pass_rate_drop: float,
    metric_tolerances: Mapping[str, float] | None,
) -> EvalReport:
    if before is None:
        return report
    comparison = compare(
        report, before, max_pass_rate_drop=max_pass_rate_drop, metric_tolerances=metric_tolerances
    )
    return with_baseline(report, comparison)


def _item_timeout(options: EvalOptions) -> float:
    return options.timeout_s + options.case_timeout_s + STREAM_SLACK_S


class EvalClientMethods(ClientBase):
    def start_eval(self, request: StartEval, *, timeout: float | None = None) -> EvalStarted:
        started: EvalStarted = self.ask(SERVICE, request, timeout=timeout, reply_type=EvalStarted)
        return started

    def cancel_eval(self, ref: str, *, timeout: float | None = None) -> None:
        self.ask(SERVICE, CancelEval(ref), timeout=timeout)

    def run_eval(
        self,
        evalset: EvalSetInput,
        *,
        agent: str,
        criteria: CriteriaInput = None,
        samples: int | None = None,
        concurrency: int | None = None,
        options: EvalOptions | Mapping[str, Any] | None = None,
        on_progress: Callable[[EvalProgress], None] | None = None,
        baseline: BaselineInput = None,
        max_pass_rate_drop: float = 0.0,
        metric_tolerances: Mapping[str, float] | None = None,
    ) -> EvalReport:
        """Run an eval set against agent `agent` (see the module docstring)."""
        request = _request(evalset, agent, criteria, options, samples, concurrency)
        before = load_baseline(baseline, max_pass_rate_drop, metric_tolerances)
        started = self.start_eval(request)
        followed = follow_run(
            self,
            started.stream,
            EvalStreamItem,
            what=f"eval {started.ref}",
            on_event=None if on_progress is None else (lambda item: on_progress(item.data)),
            window=EVENT_WINDOW,
            timeout=_item_timeout(request.options),
        )
        return _finish(followed.result(), before, max_pass_rate_drop, metric_tolerances)


class AsyncEvalMethods(AsyncClientBase):
    """The eval methods of `AsyncClient`, as coroutines (same requests and errors)."""

    async def start_eval(self, request: StartEval, *, timeout: float | None = None) -> EvalStarted:
        started: EvalStarted = await self.ask(
            SERVICE, request, timeout=timeout, reply_type=EvalStarted
        )
        return started

    async def cancel_eval(self, ref: str, *, timeout: float | None = None) -> None:
        await self.ask(SERVICE, CancelEval(ref), timeout=timeout)

    async def run_eval(
        self,
        evalset: EvalSetInput,
        *,
        agent: str,
        criteria: CriteriaInput = None,
        samples: int | None = None,
        concurrency: int | None = None,
        options: EvalOptions | Mapping[str, Any] | None = None,
        on_progress: Callable[[EvalProgress], Awaitable[None] | None] | None = None,
        baseline: BaselineInput = None,
        max_pass_rate_drop: float = 0.0,
        metric_tolerances: Mapping[str, float] | None = None,
    ) -> EvalReport:
        """Run an eval set against agent `agent`; `on_progress` may be a coroutine function."""
        request = _request(evalset, agent, criteria, options, samples, concurrency)
        before = load_baseline(baseline, max_pass_rate_drop, metric_tolerances)
        started = await self.start_eval(request)
        followed = await afollow_run(
            self,
            started.stream,
            EvalStreamItem,
            what=f"eval {started.ref}",
            on_event=None if on_progress is None else (lambda item: on_progress(item.data)),
            window=EVENT_WINDOW,
            timeout=_item_timeout(request.options),
        )
        return _finish(followed.result(), before, max_pass_rate_drop, metric_tolerances)
