"""The `eval` service: run an eval set against a registered agent, under the tree.

Requests (msgspec, tagged): `StartEval(evalset, agent, criteria, options)` and
`CancelEval(ref)`. A start answers `EvalStarted(ref, stream, total)`: the ref is bound to
the calling client (another client gets `not_owner`; when the client goes away the eval
is cancelled and every case run it started is stopped) and the stream `eval/<ref>`
carries an `EvalProgress` per finished case and one `EvalEnd` with the report.

The agent is the one the agent catalogue holds under that name (from the config, or
`tree.register_agent`), run by the eval engine with the agents runtime and what a run of
it adds everywhere (its tool policy and instructions: `phloem.agents.preparation`; eval
runs are unattended, so nothing is put to an owner for confirmation). In the tree the
service is `eval/service`, next to `eval/runs`: every live eval is a supervisor there
(`eval-run:<n>`) holding its driver and one `agent-run:...` supervisor per running case
sample, so `phloem tree` shows them. At most `[eval] max_active_evals` evals are live; one
more is refused with `backpressure`.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

from phloem.actors.eval.engine import EvalEngine
from phloem.actors.eval.options import check_options
from phloem.actors.eval.protocol import (
    CancelEval,
    EvalEnd,
    EvalProgress,
    EvalRequest,
    EvalStarted,
    StartEval,
)
from phloem.actors.services import Call, ServiceActor, ServiceContext, register_service
from phloem.actors.streams import RUN_STREAM_SEND_TIMEOUT_S, Topic
from phloem.agents.context import CancelToken
from phloem.agents.preparation import prepare
from phloem.base.logs import get_logger
from phloem.models.interceptors import Interceptors
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.evalreport import CaseResult
from phloem.protocols.limits import check_range
from phloem.protocols.refs import RefKind
from phloem.supervision import (
    Actor,
    ActorHandle,
    ChildSpec,
    ExitReason,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    sibling_of,
)
from phloem.supervision.actor import tell_if_alive

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


@dataclass
class _Eval:
    id: str
    ref: str
    token: CancelToken
    supervisor: SupervisorRef
    topic: Topic | None = None


class _Finished:
    __slots__ = ("eval_id",)

    def __init__(self, eval_id: str) -> None:
        self.eval_id = eval_id


class EvalDriver(Actor):
    """Drives one eval: waits for the subscriber, runs the engine, streams, ends the topic."""

    max_inbox = 4

    def __init__(self, run: _Eval, engine: EvalEngine, subscribe_wait_s: float) -> None:
        super().__init__()
        self.run = run
        self.engine = engine
        self.subscribe_wait_s = subscribe_wait_s

    def on_receive(self, message: Any) -> Any:
        if message != "go":
            return None
        run, topic, engine = self.run, self.run.topic, self.engine
        assert topic is not None
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
            )
            try:
                topic.send(item, timeout=RUN_STREAM_SEND_TIMEOUT_S)
            except PhloemError as exc:
                run.token.cancel(f"progress stream failed: {exc.kind}")

        engine.on_case = progress
        reason: ExitReason | None = None
        try:
            topic.stream.wait_for_subscribers(1, self.subscribe_wait_s)
            report = engine.run()
            topic.send(EvalEnd(report), timeout=RUN_STREAM_SEND_TIMEOUT_S)
        except PhloemError as exc:
            log.info("eval_ended_without_report", eval=run.id, kind=exc.kind)
            reason = ExitReason.shutdown() if exc.kind == ErrorKind.CANCELLED else None
        except Exception as exc:
            log.error("eval_driver_failed", eval=run.id, error=type(exc).__name__)
            reason = ExitReason.from_exception(exc)
        finally:
            topic.close(reason)
        self.exit(ExitReason.normal())
        return None


class EvalService(ServiceActor):
    """The `eval` service (see the module docstring)."""

    request_type = EvalRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        from phloem.models.providers import ProviderRegistry

        self.providers = ProviderRegistry(ctx.config.providers)
        self.max_active: int = ctx.config.eval.max_active_evals
        self.invocation_timeout_s: float = ctx.config.agents.invocation_timeout_s
        self.evals: dict[str, _Eval] = {}
        self._ids = itertools.count(1)
        ctx.refs.define_kind(EVAL_REF_KIND)

    def on_stop(self) -> None:
        for run in list(self.evals.values()):
            run.token.cancel("service stopping")
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
            run = self.ctx.refs.resolve(message.ref, call.owner, EVAL_REF_KIND.name)
            assert isinstance(run, _Eval)
            run.token.cancel("cancelled by its owner")
            return {"cancelled": message.ref}
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"unexpected request {type(message).__name__}")

    def on_other(self, message: Any) -> Any:
        if isinstance(message, _Finished):
            run = self.evals.pop(message.eval_id, None)
            if run is not None:
                self.ctx.refs.discard(run.ref)
                if run.supervisor.is_alive():
                    run.supervisor.stop(timeout=15.0)
        return None

    def _start(self, request: StartEval, call: Call) -> EvalStarted:
        check_options(request.options, len(request.evalset.cases))
        check_range(
            "subscribe_wait_s",
            request.subscribe_wait_s,
            0,
            60,
            kind=ErrorKind.BAD_MESSAGE,
            integer=False,
        )
        catalogue = self.ctx.resources.catalogue()
        agent = catalogue.agent(request.agent)
        tree = self.ctx.interceptors.chain()

        def chain() -> Interceptors:  # unattended: no one to confirm, so no confirmation
            return prepare(catalogue, request.agent).chain(tree)

        if len(self.evals) >= self.max_active:
            raise PhloemError(
                ErrorKind.BACKPRESSURE, f"{len(self.evals)} evals live; max_active_evals reached"
            )
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
        run = _Eval(eval_id, "", token, sup)
        ref = None
        try:
            ref = self.ctx.refs.create(
                call.owner, run, lambda reason: token.cancel(str(reason)), EVAL_REF_KIND.name
            )
            run.ref = ref.text
            run.topic = topic = self.open_topic(f"eval/{ref.text}", owner=call.owner)
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
            )
            driver = sup.start_child(
                ChildSpec(
                    "driver",
                    (EvalDriver, (run, engine, request.subscribe_wait_s), {}),
                    restart="temporary",
                )
            )
        except Exception:
            if ref is not None:
                self.ctx.refs.discard(ref.text)
            if run.topic is not None:
                run.topic.close()
            sup.stop(timeout=10.0)
            raise
        me = self.actor_ref
        driver.add_exit_callback(lambda reason: tell_if_alive(me, _Finished(eval_id)))
        self.evals[eval_id] = run
        driver.tell("go")  # type: ignore[attr-defined]
        log.info(
            "eval_started", eval=eval_id, agent=request.agent, cases=len(request.evalset.cases)
        )
        return EvalStarted(run.ref, topic.name, len(request.evalset.cases))


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
