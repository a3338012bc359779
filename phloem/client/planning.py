"""Planning methods of `phloem.Client` (daemon socket and `tree.client()` alike).

Each client is its own owner: a ref from `start_planning` works only on the client that
made it (`not_planning_owner` elsewhere), and closing the client kills the active
callback worker of every run it still owned and ends them. A run starts at once;
`start_planning_run` also names its event stream, which `follow_planning` reads from its
first event (events wait for the owner to subscribe) to the result. A durable run
(`options={"durable": True}`) also has a durable id (`PlanningStarted.run_id`) that
outlives the client and the daemon: `attach_planning(run_id)` — from any client of the
same uid — gives a new ref and stream to await, follow or cancel it;
`durable_planning_runs()` lists the ones kept. `AsyncClient` exposes the same methods as
coroutines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from phloem.actors.planning.protocol import (
    AttachPlanning,
    AwaitPlanning,
    CancelPlanning,
    ListDurablePlanning,
    PlanningCancelled,
    PlanningStarted,
    PlanningStreamItem,
    StartPlanning,
)
from phloem.client.base import AsyncClientBase, ClientBase
from phloem.client.runs import afollow_run, follow_run
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.plan import DEFAULT_OPTIONS, PlanningOptions
from phloem.protocols.result import PlanningResult, decode_result
from phloem.protocols.runs import DurableRunInfo, RunEvent

PLANNING_SERVICE = "planning/service"
# An await without a timeout waits in slices of this many seconds, so no single request
# outlives the daemon's request timeout.
AWAIT_SLICE_S = 20.0
# Added to an await's own timeout for the request carrying it.
REQUEST_SLACK_S = 5.0
EVENT_WINDOW = CreditWindow(64, 8 * 1024 * 1024)

Options = Mapping[str, Any] | PlanningOptions | None


def _options(options: Options) -> dict[str, Any] | None:
    if options is None:
        return None
    if isinstance(options, PlanningOptions):
        return {
            f: getattr(options, f)
            for f in options.__struct_fields__
            if getattr(options, f) != getattr(DEFAULT_OPTIONS, f)
        }
    return dict(options)


def _unavailable(err: PhloemError) -> PhloemError:
    """`unknown_actor` from the planning service's path means the daemon runs none."""
    if err.kind != ErrorKind.UNKNOWN_ACTOR:
        return err
    return PhloemError(
        ErrorKind.PLANNING_UNAVAILABLE,
        "the daemon runs no planning service: configure [planning.planners] "
        "and [planning.executors]",
    )


def _start_request(
    planner: Any, executor: Any, goal: Any, context: Any, options: Options
) -> StartPlanning:
    return StartPlanning(
        planner=planner, executor=executor, goal=goal, context=context, options=_options(options)
    )


def _await_request(ref: str, timeout: float | None) -> tuple[AwaitPlanning, float]:
    """One await request (None: one slice of `AWAIT_SLICE_S`) and its request timeout."""
    wait = AWAIT_SLICE_S if timeout is None else timeout
    return AwaitPlanning(ref=ref, timeout_s=wait), wait + REQUEST_SLACK_S


def _still_running(err: PhloemError) -> bool:
    return err.kind == ErrorKind.PLANNING_AWAIT_TIMEOUT


class PlanningMethods(ClientBase):
    """`run_planning`, `start_planning`, `start_planning_run`, `follow_planning`,
    `await_planning`, `cancel_planning`."""

    def _planning_ask(self, message: Any, reply_type: Any, timeout: float | None = None) -> Any:
        try:
            return self.ask(PLANNING_SERVICE, message, reply_type=reply_type, timeout=timeout)
        except PhloemError as err:
            raise _unavailable(err) from None

    def start_planning_run(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
    ) -> PlanningStarted:
        """Start a run; its opaque, owner-bound ref and the name of its event stream.
        Configuration errors raise `PhloemError` (`invalid_planning_adapter`,
        `invalid_planning_options`, ...)."""
        request = _start_request(planner, executor, goal, context, options)
        started: PlanningStarted = self._planning_ask(request, PlanningStarted)
        return started

    def start_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
    ) -> str:
        """Start a run; its opaque, owner-bound ref (see `start_planning_run`)."""
        return self.start_planning_run(planner, executor, goal, context, options).ref

    def follow_planning(
        self,
        started: PlanningStarted,
        *,
        on_event: Callable[[RunEvent[Any]], None] | None = None,
        window: CreditWindow | None = None,
    ) -> PlanningResult:
        """Read a started run's events (`on_event` sees each `RunEvent`: `plan_accepted`,
        `step_started`, `observation`, `replan`, `terminal`) to its end; its result."""
        follow_run(
            self,
            started.stream,
            PlanningStreamItem,
            what=f"planning run {started.ref}",
            on_event=on_event,
            window=window or EVENT_WINDOW,
        )
        return self.await_planning(started.ref)

    def await_planning(self, ref: str, timeout: float | None = None) -> PlanningResult:
        """The run's result; `planning_await_timeout` if it is still running after
        `timeout` seconds (None: wait until it ends). A result is handed out once."""
        while True:
            request, wait = _await_request(ref, timeout)
            try:
                return decode_result(self._planning_ask(request, str, wait))
            except PhloemError as err:
                if timeout is not None or not _still_running(err):
                    raise

    def attach_planning(self, run_id: str) -> PlanningStarted:
        """Attach to the durable run `run_id` (started by this uid, maybe before a daemon
        crash): a new ref and stream of this client's, for `await_planning`,
        `follow_planning` and `cancel_planning` (`unknown_durable_run` when none is kept;
        `not_planning_owner` for another uid's)."""
        started: PlanningStarted = self._planning_ask(AttachPlanning(run_id), PlanningStarted)
        return started

    def durable_planning_runs(self) -> list[DurableRunInfo]:
        """The durable runs kept for this uid, oldest first."""
        infos: list[DurableRunInfo] = self._planning_ask(
            ListDurablePlanning(), list[DurableRunInfo]
        )
        return infos

    def cancel_planning(self, ref: str, reason: Any = "user_cancelled") -> bool:
        """Cancel the run (its active worker is killed); False if it had already ended."""
        reply: PlanningCancelled = self._planning_ask(
            CancelPlanning(ref=ref, reason=reason), PlanningCancelled
        )
        return reply.cancelled

    def run_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
        *,
        on_event: Callable[[RunEvent[Any]], None] | None = None,
    ) -> PlanningResult:
        """Start a run and wait for its result; `on_event(event)` sees its progress."""
        started = self.start_planning_run(planner, executor, goal, context, options)
        if on_event is None:
            return self.await_planning(started.ref)
        return self.follow_planning(started, on_event=on_event)


class AsyncPlanningMethods(AsyncClientBase):
    """The planning methods of `AsyncClient`, as coroutines (same requests and errors)."""

    async def _planning_ask(
        self, message: Any, reply_type: Any, timeout: float | None = None
    ) -> Any:
        try:
            return await self.ask(PLANNING_SERVICE, message, reply_type=reply_type, timeout=timeout)
        except PhloemError as err:
            raise _unavailable(err) from None

    async def start_planning_run(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
    ) -> PlanningStarted:
        """Start a run; its ref and event stream (see `Client.start_planning_run`)."""
        request = _start_request(planner, executor, goal, context, options)
        started: PlanningStarted = await self._planning_ask(request, PlanningStarted)
        return started

    async def start_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
    ) -> str:
        """Start a run; its opaque, owner-bound ref (see `Client.start_planning`)."""
        started = await self.start_planning_run(planner, executor, goal, context, options)
        return started.ref

    async def follow_planning(
        self,
        started: PlanningStarted,
        *,
        on_event: Callable[[RunEvent[Any]], Awaitable[None] | None] | None = None,
        window: CreditWindow | None = None,
    ) -> PlanningResult:
        """Read a started run's events to its end; its result (see the sync client)."""
        await afollow_run(
            self,
            started.stream,
            PlanningStreamItem,
            what=f"planning run {started.ref}",
            on_event=on_event,
            window=window or EVENT_WINDOW,
        )
        return await self.await_planning(started.ref)

    async def await_planning(self, ref: str, timeout: float | None = None) -> PlanningResult:
        """The run's result; `planning_await_timeout` if it is still running after
        `timeout` seconds (None: wait until it ends, in slices of `AWAIT_SLICE_S`)."""
        while True:
            request, wait = _await_request(ref, timeout)
            try:
                return decode_result(await self._planning_ask(request, str, wait))
            except PhloemError as err:
                if timeout is not None or not _still_running(err):
                    raise

    async def attach_planning(self, run_id: str) -> PlanningStarted:
        """Attach to the durable run `run_id` (see `Client.attach_planning`)."""
        started: PlanningStarted = await self._planning_ask(AttachPlanning(run_id), PlanningStarted)
        return started

    async def durable_planning_runs(self) -> list[DurableRunInfo]:
        """The durable runs kept for this uid, oldest first."""
        infos: list[DurableRunInfo] = await self._planning_ask(
            ListDurablePlanning(), list[DurableRunInfo]
        )
        return infos

    async def cancel_planning(self, ref: str, reason: Any = "user_cancelled") -> bool:
        """Cancel the run (its active worker is killed); False if it had already ended."""
        reply: PlanningCancelled = await self._planning_ask(
            CancelPlanning(ref=ref, reason=reason), PlanningCancelled
        )
        return reply.cancelled

    async def run_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
        *,
        on_event: Callable[[RunEvent[Any]], Awaitable[None] | None] | None = None,
    ) -> PlanningResult:
        """Start a run and wait for its result; `on_event(event)` (a function or a
        coroutine function) sees its progress."""
        started = await self.start_planning_run(planner, executor, goal, context, options)
        if on_event is None:
            return await self.await_planning(started.ref)
        return await self.follow_planning(started, on_event=on_event)
