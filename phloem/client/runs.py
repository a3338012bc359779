"""Runs from the client: the one reader of a run's stream, and the record of recent runs.

Every client method that follows a run — `run_agent`, `session_run`, `run_eval`,
`run_planning`, in `Client` and `AsyncClient` alike — reads its stream through
`follow_run` / `afollow_run`: `RunEvent`s go to `on_event`, a `ConfirmRequest` to
`on_confirm` (its answer sent with `answer`; one that comes too late is dropped), a
`RunMissed` is counted, and the `RunEnd` ends it. A stream that closes without its end
is `run_incomplete`.

`list_runs()` and `follow_runs()` read the tree's record of recent runs (the `runs`
service): kind, name, owner, times, outcome and the last events of every run, however
short, content-free (`phloem.protocols.runs`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from phloem.client.base import AsyncClientBase, ClientBase, EventStream
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.runs import (
    ConfirmRequest,
    FollowRuns,
    ListRuns,
    RunEnd,
    RunEvent,
    RunMissed,
    RunsFollowing,
    RunSummary,
    RunUpdate,
)
from phloem.protocols.warnings import RunWarning

if TYPE_CHECKING:
    from phloem.client.aiostream import AsyncEventStream
    from phloem.protocols.credit import CreditWindow

SERVICE = "runs"
MISSED_WARNING = "events_missed"


@dataclass
class Followed:
    """A run read to its end: its `RunEnd`, the events seen, and how many it missed."""

    end: RunEnd[Any]
    events: list[RunEvent[Any]] = field(default_factory=list)
    missed: int = 0

    def result(self) -> Any:
        """The run's result; a run that ended without one raises its error."""
        if self.end.result is not None:
            return self.end.result
        error = self.end.error
        if error is None:
            raise PhloemError(ErrorKind.RUN_INCOMPLETE, f"the run ended {self.end.outcome}")
        raise PhloemError.from_value(error)

    def warnings(self) -> list[RunWarning]:
        """A warning that events were missed, when some were."""
        if not self.missed:
            return []
        text = f"{self.missed} early events of the run were dropped before it was followed"
        return [RunWarning(code=MISSED_WARNING, message=text)]


class _Fold:
    """The state of one run's reading, shared by the blocking and the asyncio reader."""

    def __init__(self, what: str, timeout: float | None, deadline: float | None) -> None:
        self.what = what
        self.timeout = timeout
        self.deadline = deadline
        self.events: list[RunEvent[Any]] = []
        self.missed = 0

    def wait(self) -> float | None:
        """How long to wait for the next item (`timeout` when the deadline has passed)."""
        if self.deadline is None:
            return self.timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise PhloemError(ErrorKind.TIMEOUT, f"{self.what}: its deadline passed")
        return left if self.timeout is None else min(left, self.timeout)

    def ended(self, err: PhloemError) -> PhloemError:
        """What a stream end before the `RunEnd` means: its own error, or
        `run_incomplete` when it merely closed."""
        if err.kind != ErrorKind.CLOSED:
            return err
        return PhloemError(ErrorKind.RUN_INCOMPLETE, f"the stream of {self.what} ended early")

    def take(self, item: Any) -> Any:
        if isinstance(item, RunMissed):
            self.missed += item.count
            return None
        if isinstance(item, RunEvent):
            self.events.append(item)
        return item

    def done(self, end: RunEnd[Any]) -> Followed:
        return Followed(end, self.events, self.missed)


def follow_run(
    client: ClientBase,
    stream: str,
    item_type: Any,
    *,
    what: str,
    on_event: Callable[[RunEvent[Any]], None] | None = None,
    on_confirm: Callable[[ConfirmRequest], bool] | None = None,
    answer: Callable[[str, bool], None] | None = None,
    window: CreditWindow | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
) -> Followed:
    """Read the run's stream to its end (see the module docstring). `timeout` bounds the
    wait for each item, `deadline` (a `time.monotonic()` value) the whole reading; either
    passing raises `timeout`."""
    fold = _Fold(what, timeout, deadline)
    with client.subscribe(stream, window, event_type=item_type) as items:
        while True:
            try:
                item = fold.take(items.recv(fold.wait()))
            except PhloemError as err:
                raise fold.ended(err) from None
            if isinstance(item, RunEnd):
                return fold.done(item)
            if isinstance(item, ConfirmRequest):
                if on_confirm is not None and answer is not None:
                    _answer(answer, item.call_id, bool(on_confirm(item)))
            elif isinstance(item, RunEvent) and on_event is not None:
                on_event(item)


async def afollow_run(
    client: AsyncClientBase,
    stream: str,
    item_type: Any,
    *,
    what: str,
    on_event: Callable[[RunEvent[Any]], Awaitable[None] | None] | None = None,
    on_confirm: Callable[[ConfirmRequest], Awaitable[bool] | bool] | None = None,
    answer: Callable[[str, bool], Awaitable[None]] | None = None,
    window: CreditWindow | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
) -> Followed:
    """`follow_run` for `AsyncClient`: the callbacks may be coroutine functions."""
    fold = _Fold(what, timeout, deadline)
    items = await client.subscribe(stream, window, event_type=item_type)
    async with items:
        while True:
            try:
                item = fold.take(await items.recv(fold.wait()))
            except PhloemError as err:
                raise fold.ended(err) from None
            if isinstance(item, RunEnd):
                return fold.done(item)
            if isinstance(item, ConfirmRequest):
                if on_confirm is not None and answer is not None:
                    approve = on_confirm(item)
                    if inspect.isawaitable(approve):
                        approve = await approve
                    try:
                        await answer(item.call_id, bool(approve))
                    except PhloemError as err:
                        if err.kind != ErrorKind.UNKNOWN_CALL:  # too late: dropped
                            raise
            elif isinstance(item, RunEvent) and on_event is not None:
                outcome = on_event(item)
                if inspect.isawaitable(outcome):
                    await outcome


def _answer(answer: Callable[[str, bool], None], call_id: str, approve: bool) -> None:
    try:
        answer(call_id, approve)
    except PhloemError as err:
        if err.kind != ErrorKind.UNKNOWN_CALL:  # too late: dropped
            raise


class RunsClientMethods(ClientBase):
    """`list_runs` and `follow_runs`: the tree's record of recent runs."""

    def list_runs(self, *, timeout: float | None = None) -> list[RunSummary]:
        """Every run the tree keeps a record of, oldest first (content-free)."""
        runs: list[RunSummary] = self.ask(
            SERVICE, ListRuns(), timeout=timeout, reply_type=list[RunSummary]
        )
        return runs

    def follow_runs(
        self, window: CreditWindow | None = None
    ) -> tuple[list[RunSummary], EventStream[RunUpdate]]:
        """The record now, and a stream of every change after it (`RunUpdate`s)."""
        following: RunsFollowing = self.ask(SERVICE, FollowRuns(), reply_type=RunsFollowing)
        return following.runs, self.subscribe(following.stream, window, event_type=RunUpdate)


class AsyncRunsMethods(AsyncClientBase):
    """`list_runs` and `follow_runs` of `AsyncClient`, as coroutines."""

    async def list_runs(self, *, timeout: float | None = None) -> list[RunSummary]:
        runs: list[RunSummary] = await self.ask(
            SERVICE, ListRuns(), timeout=timeout, reply_type=list[RunSummary]
        )
        return runs

    async def follow_runs(
        self, window: CreditWindow | None = None
    ) -> tuple[list[RunSummary], AsyncEventStream[RunUpdate]]:
        following: RunsFollowing = await self.ask(SERVICE, FollowRuns(), reply_type=RunsFollowing)
        stream = await self.subscribe(following.stream, window, event_type=RunUpdate)
        return following.runs, stream
