"""The `eval` service: run an eval set against a registered agent, under the tree.

Requests (msgspec, tagged): `StartEval(evalset, agent, criteria, options)` and
`CancelEval(ref)`. A start answers `EvalStarted(ref, stream, total)` at once, a run of the
one run lifecycle (`phloem.actors.runs`): the ref is bound to the calling client (another
client gets `not_owner`; when the client goes away the eval is cancelled and every case
run it started is stopped) and the stream `eval/<ref>` carries a `case_done` `RunEvent`
per finished case (its data an `EvalProgress`) and one `RunEnd` with the report.

The agent is the one the agent catalogue holds under that name (from the config, or
`tree.register_agent`), run by the eval engine with the agents runtime and what a run of
it adds everywhere (its tool policy and instructions: `phloem.agents.preparation`; eval
runs are unattended, so nothing is put to an owner for confirmation). In the tree the
service is `eval/service`, next to `eval/runs`: every live eval is a supervisor there
(`eval-run:<n>`) holding its driver (a `RunDriver`) and one `agent-run:...` supervisor per
running case sample, so `phloem tree` shows them. At most `[eval] max_active_evals` evals
are live; one more is refused with `backpressure`.
"""

from __future__ import annotations

import functools
import itertools
import time
from typing import Any

from phloem.actors.eval.engine import EvalEngine
from phloem.actors.eval.options import check_options
from phloem.actors.eval.protocol import (
    CancelEval,
    EvalProgress,
    EvalRequest,
    EvalStarted,
    StartEval,
)
from phloem.actors.eval.scorers import check_scorers, load_scorers
from phloem.actors.runs import Run, RunDriver, ServiceRuns
from phloem.actors.services import Call, ServiceActor, ServiceContext, register_service
from phloem.agents.context import CancelToken
from phloem.agents.preparation import prepare
from phloem.base.logs import get_logger
from phloem.models.interceptors import Interceptors
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.evalreport import CaseResult, diagnosis_lines
from phloem.protocols.refs import RefKind
from phloem.supervision import (
    ActorHandle,
    ChildHandle,
    ChildSpec,
    ExitReason,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    sibling_of,
)

log = get_logger("phloem.eval")

SERVICE_NAME = "eval"
SERVICE_ID = "service"
RUNS_ID = "runs"
EVAL_REF_KIND = RefKind(
    "eval_run",
    prefix="evalrun_",
    invalid_error=ErrorKind.INVALID_REF,
    not_owner_error=ErrorKind.NOT_OWNER,
)


def drive(engine: EvalEngine, run: Run) -> None:
    """The work of one eval (its `RunDriver`'s): run the engine, a `case_done` event per
    finished case, then the report as the end (`cancelled` when the eval was)."""
    total = len(engine.evalset.cases)
    counts = {"passed": 0, "evaluated": 0}

    def progress(case: CaseResult, done: int) -> None:
        counts["passed"] += case.status == "passed"
        counts["evaluated"] += case.status != "not_evaluated"
        item = EvalProgress(
            case.id,
            case.status,
            done,
            total,
            counts["passed"],
            counts["evaluated"],
            round(time.monotonic() - engine.started, 3),
            "\n".join(diagnosis_lines(case)),
        )
        note = {"case": case.id, "status": case.status, "done": done, "total": total}
        run.emit("case_done", item, {**note, "passed": counts["passed"]})

    engine.on_case = progress
    try:
        report = engine.run()
    except PhloemError as exc:
        log.info("eval_ended_without_report", eval=run.id, kind=exc.kind)
        run.end("cancelled" if exc.kind == ErrorKind.CANCELLED else "failed", error=exc.to_value())
        return
    run.end("done", result=report)


class EvalService(ServiceActor):
    """The `eval` service (see the module docstring)."""

    request_type = EvalRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        from phloem.models.providers import ProviderRegistry

        self.scorers = load_scorers(ctx.config.eval.scorers)
        self.providers = ProviderRegistry(ctx.config.providers)
        self.invocation_timeout_s: float = ctx.config.agents.invocation_timeout_s
        self.runs = ServiceRuns.of(
            self, "eval", EVAL_REF_KIND, max_live=ctx.config.eval.max_active_evals
        )
        self._ids = itertools.count(1)

    def on_stop(self) -> None:
        self.runs.stop()
        self.providers.close()
        super().on_stop()

    def _sibling(self, *path: str) -> ActorHandle:
        """An actor of the tree found from this service: `(top, child)` names a child of
        a root service supervisor (`agents/service`); `(id,)` a sibling (`runs`)."""
        handle = self._phloem_handle
        if len(path) == 1:
            found = sibling_of(handle, path[0]) if handle is not None else None
        else:
            parent = getattr(handle, "_parent", None)
            top = sibling_of(parent, path[0]) if parent is not None else None
            found = None
            if isinstance(top, SupervisorRef):
                found = next((c.ref for c in top.which_children() if c.id == path[1]), None)
        if not isinstance(found, ActorHandle) or not found.is_alive():
            raise PhloemError(ErrorKind.UNSUPPORTED, f"no {'/'.join(path)} service in this tree")
        return found

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, StartEval):
            return self._start(message, call)
        if isinstance(message, CancelEval):
            self.runs.cancel(message.ref, call.owner)
            return {"cancelled": message.ref}
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"unexpected request {type(message).__name__}")

    def _exited(self, run: Run, reason: ExitReason) -> None:
        """An eval's driver is gone (in this service's thread): its supervisor goes too."""
        sup = run.context
        assert isinstance(sup, SupervisorRef)
        if sup.is_alive():
            sup.stop(timeout=15.0)

    def _start(self, request: StartEval, call: Call) -> EvalStarted:
        if not request.evalset.cases:  # a file says so when it is read; a struct here
            raise PhloemError(
                ErrorKind.EVAL_SET_INVALID,
                f"eval set {request.evalset.id!r} has no cases; it needs at least one",
            )
        check_options(request.options, len(request.evalset.cases))
        check_scorers(request.criteria, self.scorers)
        catalogue = self.ctx.resources.catalogue()
        agent = catalogue.agent(request.agent)
        tree = self.ctx.interceptors.chain()

        def chain() -> Interceptors:  # unattended: no one to confirm, so no confirmation
            return prepare(catalogue, request.agent).chain(tree)

        self.runs.check_room()
        runs = self._sibling(RUNS_ID)
        assert isinstance(runs, SupervisorRef)
        eval_id = f"eval-{next(self._ids)}"
        token = CancelToken()
        sup = runs.start_child(
            ChildSpec(
                f"eval-run:{eval_id}",
                SupervisorChild(SupervisorSpec(strategy="one_for_one", intensity=0)),
                restart="temporary",
            )
        )
        assert isinstance(sup, SupervisorRef)
        try:
            engine = EvalEngine(
                agent,
                request.evalset,
                request.criteria,
                request.options,
                parent=sup,
                judges=self.providers.get,
                cancel=token,
                chain=chain,
                invocation_timeout_s=min(self.invocation_timeout_s, request.options.case_timeout_s),
                launcher=self.ctx.resources.launcher("eval_cases"),
                scorers=self.scorers,
            )

            def launch(run: Run) -> ChildHandle:
                work = functools.partial(drive, engine)
                spec = ChildSpec("driver", (RunDriver, (run, work), {}), restart="temporary")
                return sup.start_child(spec)

            run = self.runs.start(
                call.owner,
                request.evalset.id,
                launch,
                context=sup,
                token=token,
                on_exit=self._exited,
            )
        except Exception:
            sup.stop(timeout=10.0)
            raise
        log.info(
            "eval_started", eval=eval_id, agent=request.agent, cases=len(request.evalset.cases)
        )
        return EvalStarted(run.ref, run.stream, len(request.evalset.cases))


def eval_factory(ctx: ServiceContext) -> ChildSpec:
    """`eval`: a supervisor holding `runs` (one child supervisor per eval) and `service`."""
    return ChildSpec(
        SERVICE_NAME,
        SupervisorChild(
            SupervisorSpec(strategy="one_for_one", intensity=3),
            [
                ChildSpec(RUNS_ID, SupervisorChild(SupervisorSpec(intensity=0))),
                ChildSpec(SERVICE_ID, (EvalService, (ctx,), {}), shutdown=15.0),
            ],
        ),
    )


register_service(SERVICE_NAME, eval_factory)
