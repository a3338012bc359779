"""Runs on the wire: the one stream item shape of every run, and the record of recent runs.

Every run — an agent run, a session turn, an eval, a planning run — answers its start with
a ref bound to the caller and the name of its event stream, readable by that owner only.
The stream carries `RunItem`s, in order:

- `RunMissed(count)` first, when events emitted before the owner subscribed overflowed
  the run's buffer (the oldest went; `count` says how many);
- `RunEvent(seq, at, kind, data)` for each event: `kind` names it (`agent_event`,
  `case_done`, `plan_accepted`, `step_started`, ...) and `data` is the feature's payload;
- `ConfirmRequest` when a mutating tool call waits for the owner's approval;
- exactly one `RunEnd(seq, at, outcome, error, result)` last: `outcome` is `done`,
  `failed` or `cancelled`, `error` says why a run did not end `done`, `result` is the
  feature's result (an `AgentRun`, an `AskResult`, an `EvalReport`, a planning result).

A stream that ends without its `RunEnd` is `run_incomplete`. Decode with
`run_item_type(data, result)` for typed payloads, or `RunItem` for plain data.

The tree's record of recent runs (`ListRuns`, `FollowRuns`) is content-free, because any
client of the tree may read it: a `RunSummary` carries kind, name, owner, times, outcome
and error kind, its telemetry trace id (when telemetry is on), and the last events as
`RunNote`s — an event's kind and a few scalar
details (ids, names, counts, error kinds), never prompts, inputs, outputs or state.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

import msgspec

from phloem.protocols.errors import ErrorValue

D = TypeVar("D")
R = TypeVar("R")

RunOutcome = Literal["done", "failed", "cancelled"]
OUTCOMES: tuple[RunOutcome, ...] = ("done", "failed", "cancelled")

MAX_NOTE_DETAILS = 8
"""Details one `RunNote` keeps (the first ones given)."""
MAX_NOTE_TEXT_CHARS = 120
"""A note's text detail (a name, an id, an error kind) is cut to this many characters."""


class RunEvent(msgspec.Struct, Generic[D], frozen=True, tag="event"):
    """One event of a run: its number in the run (from 1), wall time, kind, payload."""

    seq: int
    at: float
    kind: str
    data: D


class RunEnd(msgspec.Struct, Generic[R], frozen=True, tag="end"):
    """The last item of a run's stream: how it ended and what it produced."""

    seq: int
    at: float
    outcome: RunOutcome
    error: ErrorValue | None = None
    result: R | None = None


class RunMissed(msgspec.Struct, frozen=True, tag="missed"):
    """Events the run emitted before its owner subscribed that did not fit its buffer."""

    count: int


class ConfirmRequest(msgspec.Struct, frozen=True, tag="confirm"):
    """A mutating tool call waiting for the run owner's approval (kind `confirm`).

    The owner answers with the call id (`client.confirm_agent_run(ref, call_id, approve)`,
    `client.session_confirm(session_id, call_id, approve)`). What is shown is what runs:
    `args` are exactly the arguments an approved call runs with, never redacted (a
    redacted command is another command); `secrets` marks, as JSON Pointers into `args`
    (`/command`, `/env/API_KEY`), the values that look like credentials, for a renderer
    to highlight. Only the run's owner receives the request; the run's record keeps the
    tool's name, never its arguments.
    """

    call_id: str
    tool: str
    args: dict[str, Any]
    agent: str = ""
    timeout_s: float = 60.0
    secrets: list[str] = []

    @property
    def kind(self) -> str:
        return "confirm"


RunItem = RunEvent[Any] | RunEnd[Any] | ConfirmRequest | RunMissed


def run_item_type(data: Any, result: Any) -> Any:
    """The item type of a stream whose events carry `data` and whose end carries `result`."""
    return RunEvent[data] | RunEnd[result] | ConfirmRequest | RunMissed


# --- the record of recent runs ------------------------------------------------------------

NoteValue = str | int | float | bool | None


class RunNote(msgspec.Struct, frozen=True):
    """One event as the record keeps it: kind and content-free details."""

    seq: int
    at: float
    kind: str
    detail: dict[str, NoteValue] = {}


class RunSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One run as the record shows it. `outcome` is None while it runs."""

    id: str
    kind: str  # agent, session, eval, planning
    name: str
    owner: str
    started_at: float
    ended_at: float | None = None
    outcome: RunOutcome | None = None
    error: str | None = None  # the error kind of a run that did not end `done`
    events: list[RunNote] = []  # the last ones, oldest first
    event_count: int = 0
    events_dropped: int = 0  # the oldest events no longer kept
    trace_id: str = ""  # the run's telemetry trace (32 hex digits); "" with telemetry off


class ListRuns(msgspec.Struct, frozen=True, tag="list"):
    """Answered with the record: `list[RunSummary]`, oldest run first."""


class FollowRuns(msgspec.Struct, frozen=True, tag="follow"):
    """Answered with `RunsFollowing`: the record now and a stream of what changes next."""


RunsRequest = ListRuns | FollowRuns


class RunsFollowing(msgspec.Struct, frozen=True):
    """The record at the moment `stream` (owned by the caller) began: every change after
    it comes on the stream as a `RunUpdate`, none before it."""

    stream: str
    runs: list[RunSummary]


class RunBegan(msgspec.Struct, frozen=True, tag="began"):
    run: RunSummary


class RunNoted(msgspec.Struct, frozen=True, tag="noted"):
    id: str
    note: RunNote


class RunFinished(msgspec.Struct, frozen=True, tag="finished"):
    id: str
    ended_at: float
    outcome: RunOutcome
    error: str | None = None


class RunForgotten(msgspec.Struct, frozen=True, tag="forgotten"):
    """The record dropped the run (it keeps a bounded number)."""

    id: str


RunUpdate = RunBegan | RunNoted | RunFinished | RunForgotten | RunMissed
"""What a `FollowRuns` stream carries (`RunMissed` first if updates made before the
follower subscribed overflowed its buffer)."""


class DurableRunInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One durable run as `phloem runs --durable` lists it (content-free: no input, no
    result). `outcome` is None while it has not ended."""

    id: str
    kind: str
    name: str
    uid: int
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None
    steps: int = 0  # completed steps
    bytes: int = 0
    live: bool = False  # running in this daemon now
