"""Planning methods of `phloem.Client` (daemon socket and `tree.client()` alike).

Each client is its own owner: a ref from `start_planning` works only on the client that
made it (`not_planning_owner` elsewhere), and closing the client kills the active
callback worker of every run it still owned and ends them. `AsyncClient` exposes the same
methods as coroutines.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from phloem.actors.planning.events import (
    DEFAULT_EVENT_WINDOW_BYTES,
    DEFAULT_EVENT_WINDOW_MESSAGES,
    PlanningEvent,
)
from phloem.actors.planning.protocol import (
    AwaitPlanning,
    CancelPlanning,
    OpenPlanningEvents,
    PlanningCancelled,
    PlanningStarted,
    StartPlanning,
)
from phloem.client.base import AsyncClientBase, ClientBase, EventStream
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.plan import DEFAULT_OPTIONS, PlanningOptions
from phloem.protocols.result import PlanningResult, decode_result

if TYPE_CHECKING:
    from phloem.client.aiostream import AsyncEventStream

PLANNING_SERVICE = "planning/service"
# An await without a timeout waits in slices of this many seconds, so no single request
# outlives the daemon's request timeout.
AWAIT_SLICE_S = 20.0
# Added to an await's own timeout for the request carrying it.
REQUEST_SLACK_S = 5.0

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
    planner: Any, executor: Any, goal: Any, context: Any, options: Options, events: str | None
) -> StartPlanning:
    return StartPlanning(
        planner=planner,
        executor=executor,
        goal=goal,
        context=context,
        options=_options(options),
        events=events,
    )


def _event_window(window: CreditWindow | None) -> CreditWindow:
    return window or CreditWindow(DEFAULT_EVENT_WINDOW_MESSAGES, DEFAULT_EVENT_WINDOW_BYTES)


def _await_request(ref: str, timeout: float | None) -> tuple[AwaitPlanning, float]:
    """One await request (None: one slice of `AWAIT_SLICE_S`) and its request timeout."""
    wait = AWAIT_SLICE_S if timeout is None else timeout
    return AwaitPlanning(ref=ref, timeout_s=wait), wait + REQUEST_SLACK_S


def _still_running(err: PhloemError) -> bool:
    return err.kind == ErrorKind.PLANNING_AWAIT_TIMEOUT


class PlanningMethods(ClientBase):
    """`run_planning`, `start_planning`, `await_planning`, `cancel_planning`."""

    def _planning_ask(self, message: Any, reply_type: Any, timeout: float | None = None) -> Any:
        try:
            return self.ask(PLANNING_SERVICE, message, reply_type=reply_type, timeout=timeout)
        except PhloemError as err:
            raise _unavailable(err) from None

    def start_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
        *,
        events: EventStream[Any] | None = None,
    ) -> str:
        """Start a run; its opaque, owner-bound ref. Configuration errors raise
        `PhloemError` (`invalid_planning_adapter`, `invalid_planning_options`, ...).

        Pass `events=client.open_planning_events()` to receive every event of the run.
        """
        request = _start_request(
            planner, executor, goal, context, options, events.name if events else None
        )
        started: PlanningStarted = self._planning_ask(request, PlanningStarted)
        return started.ref

    def open_planning_events(
        self, window: CreditWindow | None = None
    ) -> EventStream[PlanningEvent]:
        """A stream for the next `start_planning(events=...)`: subscribed before it starts,
        so no event is missed. Ends after the run's `terminal` event."""
        name = self._planning_ask(OpenPlanningEvents(), str)
        return self.subscribe(name, _event_window(window), event_type=PlanningEvent)

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
        on_event: Callable[[PlanningEvent], None] | None = None,
    ) -> PlanningResult:
        """Start a run and wait for its result; `on_event(event)` sees its progress."""
        if on_event is None:
            ref = self.start_planning(planner, executor, goal, context, options)
            return self.await_planning(ref)
        stream = self.open_planning_events()
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                for event in stream:
                    on_event(event)
            except BaseException as exc:
                failure.append(exc)

        reader = threading.Thread(target=pump, name="planning-events", daemon=True)
        reader.start()
        try:
            ref = self.start_planning(planner, executor, goal, context, options, events=stream)
            result = self.await_planning(ref)
            reader.join(REQUEST_SLACK_S)
        finally:
            stream.close()
        if failure and not isinstance(failure[0], PhloemError):
            raise failure[0]
        return result


class AsyncPlanningMethods(AsyncClientBase):
    """The planning methods of `AsyncClient`, as coroutines (same requests and errors)."""

    async def _planning_ask(
        self, message: Any, reply_type: Any, timeout: float | None = None
    ) -> Any:
        try:
            return await self.ask(PLANNING_SERVICE, message, reply_type=reply_type, timeout=timeout)
        except PhloemError as err:
            raise _unavailable(err) from None

    async def start_planning(
        self,
        planner: Any,
        executor: Any,
        goal: Any = None,
        context: Any = None,
        options: Options = None,
        *,
        events: AsyncEventStream[Any] | None = None,
    ) -> str:
        """Start a run; its opaque, owner-bound ref (see `Client.start_planning`)."""
        request = _start_request(
            planner, executor, goal, context, options, events.name if events else None
        )
        started: PlanningStarted = await self._planning_ask(request, PlanningStarted)
        return started.ref

    async def open_planning_events(
        self, window: CreditWindow | None = None
    ) -> AsyncEventStream[PlanningEvent]:
        """A stream for the next `start_planning(events=...)`; ends after `terminal`."""
        name = await self._planning_ask(OpenPlanningEvents(), str)
        return await self.subscribe(name, _event_window(window), event_type=PlanningEvent)

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
        on_event: Callable[[PlanningEvent], Awaitable[None] | None] | None = None,
    ) -> PlanningResult:
        """Start a run and wait for its result; `on_event(event)` (a function or a
        coroutine function) sees its progress."""
        import asyncio  # loaded by whoever runs this coroutine; not by the blocking client

        if on_event is None:
            ref = await self.start_planning(planner, executor, goal, context, options)
            return await self.await_planning(ref)
        stream = await self.open_planning_events()

        async def pump() -> None:
            async for event in stream:
                outcome = on_event(event)
                if inspect.isawaitable(outcome):
                    await outcome

        reader = asyncio.create_task(pump(), name="planning-events")
        try:
            ref = await self.start_planning(
                planner, executor, goal, context, options, events=stream
            )
            result = await self.await_planning(ref)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), REQUEST_SLACK_S)
        finally:
            if not reader.done():
                reader.cancel()
            await asyncio.wait([reader])
            await stream.aclose()
        failure = None if reader.cancelled() else reader.exception()
        if failure is not None and not isinstance(failure, PhloemError):
            raise failure
        return result
