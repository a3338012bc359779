"""Messages of the `sessions` service, shared by the service and the client methods.

Requests are a tagged union (`SessionRequest`). A run's stream `sessions/<ref>` carries
the run items of `phloem.protocols.runs` (`SessionStreamItem`): an `agent_event`
`RunEvent` per event as it happens, then one `RunEnd` with the turn's `AskResult`. With
confirmation on, a `ConfirmRequest` (kind `confirm`) asks the run's owner about a
mutating tool call; the owner answers with `ConfirmSession(session_id, call_id, approve)`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.sessions.results import AskResult
from phloem.agents.events import Event
from phloem.protocols.runs import run_item_type
from phloem.protocols.warnings import RunWarning


class NewSession(msgspec.Struct, frozen=True, tag="new"):
    agent: str | None = None
    workdir: str | None = None
    session_id: str | None = None


class RunSession(msgspec.Struct, frozen=True, tag="run"):
    session_id: str
    prompt: str
    # This turn's own tool policy, intersected with the agent's (denials win).
    tools_allow: list[str] | None = None
    tools_deny: list[str] = []


class ConfirmSession(msgspec.Struct, frozen=True, tag="confirm"):
    """The run owner's answer to a `ConfirmRequest` on the session run's stream."""

    session_id: str
    call_id: str
    approve: bool


class CancelSession(msgspec.Struct, frozen=True, tag="cancel"):
    session_id: str


class ListSessions(msgspec.Struct, frozen=True, tag="list"):
    pass


class ShowSession(msgspec.Struct, frozen=True, tag="show"):
    session_id: str
    max_events: int = 1_000


class DeleteSession(msgspec.Struct, frozen=True, tag="delete"):
    session_id: str


SessionRequest = (
    NewSession
    | RunSession
    | CancelSession
    | ListSessions
    | ShowSession
    | DeleteSession
    | ConfirmSession
)


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A session as listings show it."""

    id: str
    agent: str
    workdir: str
    created: float
    updated: float
    transcript: str
    busy: bool = False
    events: int | None = None  # None: not known without reading the whole transcript


class CompactionMarks(msgspec.Struct, frozen=True, kw_only=True):
    """Where the session's sticky compaction decisions fall in its transcript: the ids
    of the events whose function responses are elided from model requests, and of the
    events in dropped turns (the transcript itself keeps everything)."""

    elided: list[str] = []
    dropped: list[str] = []
    calibration: float = 1.0
    exhausted: bool = False  # the budget could not be met once (warned once)


class SessionDetail(msgspec.Struct, frozen=True, kw_only=True):
    """One session: its summary, its state (secrets pruned), its last events, and what its
    agent runs on (so a client can say so, and name a missing key before a turn)."""

    summary: SessionSummary
    state: dict[str, Any]
    events: list[Event]
    event_count: int
    provider: str = ""  # the agent's `[providers.NAME]`
    model: str = ""  # that provider's model
    # The variable the provider's API key is read from, when the daemon's environment
    # does not set it ("" when it is set, or the provider needs none).
    missing_key_env: str = ""
    templates: bool = False  # the agent expands the workspace's `/name args` templates
    compaction: CompactionMarks | None = None  # None: no compaction decisions kept
    # The session's most recent warnings (its turns' since the daemon started, at most
    # 256, oldest first): a snapshot, the same ones its AskResults carried.
    warnings: list[RunWarning] = []


class SessionRunStarted(msgspec.Struct, frozen=True):
    ref: str
    stream: str
    session_id: str


SessionStreamItem = run_item_type(Event, AskResult)
