"""Messages of the `agents` service, shared by the service and the client methods.

Requests are a tagged union (`AgentRequest`); a run's stream carries the run items of
`phloem.protocols.runs` (`AgentStreamItem`): an `agent_event` `RunEvent` for every event
as it happens (its data the `Event`), then one `RunEnd` with the `AgentRun` — outcome and
final state (its `events` are empty: they were sent one by one; the client puts them
back). With confirmation on, a `ConfirmRequest` (kind `confirm`) asks the owner about a
mutating tool call; the owner answers with `ConfirmAgentRun(ref, call_id, approve)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from phloem.agents.agent import Agent
from phloem.agents.events import Event
from phloem.agents.runner import AgentRun
from phloem.protocols.runs import run_item_type
from phloem.supervision.refs import Owner


class ListAgents(msgspec.Struct, frozen=True, tag="list"):
    pass


class PlanAgent(msgspec.Struct, frozen=True, tag="plan"):
    name: str
    state: dict[str, Any] = msgspec.field(default_factory=dict)


class StartAgentRun(msgspec.Struct, frozen=True, tag="run"):
    name: str
    input: str | None = None
    state: dict[str, Any] = msgspec.field(default_factory=dict)
    # This run's own tool policy, intersected with the agent's (denials win).
    tools_allow: list[str] | None = None
    tools_deny: list[str] = []
    # Journal every model response and tool result; a daemon that dies mid-run resumes
    # it on start without asking the model again what it answered (docs/durable-runs.md).
    durable: bool = False


class CancelAgentRun(msgspec.Struct, frozen=True, tag="cancel"):
    ref: str


class ConfirmAgentRun(msgspec.Struct, frozen=True, tag="confirm"):
    """The run owner's answer to a `ConfirmRequest` on the run's stream."""

    ref: str
    call_id: str
    approve: bool


class AttachAgentRun(msgspec.Struct, frozen=True, tag="attach"):
    """Bind the durable agent run `run_id` to the caller (its uid must be the starter's;
    `not_planning_owner` otherwise): answered with `AgentRunStarted` — a fresh ref and
    stream of the caller's; a run that has ended hands that stream its end at once."""

    run_id: str


class ListDurableAgentRuns(msgspec.Struct, frozen=True, tag="durable"):
    """Answered with the durable agent runs kept for the caller's uid
    (`list[phloem.protocols.runs.DurableRunInfo]`), oldest first."""


class ListProviders(msgspec.Struct, frozen=True, tag="providers"):
    """The configured model providers as `phloem model list` shows them
    (`phloem.models.providers.provider_rows`, keys checked in the daemon's environment)."""


AgentRequest = (
    ListAgents
    | PlanAgent
    | StartAgentRun
    | CancelAgentRun
    | ConfirmAgentRun
    | ListProviders
    | AttachAgentRun
    | ListDurableAgentRuns
)


class AgentInfo(msgspec.Struct, frozen=True):
    name: str
    kind: str
    description: str
    sub_agents: list[str] = []
    max_iterations: int | None = None


class AgentPlan(msgspec.Struct, frozen=True):
    name: str
    groups: list[list[str]]


class AgentRunStarted(msgspec.Struct, frozen=True):
    ref: str
    stream: str
    run_id: str = ""  # a durable run's durable id


AgentStreamItem = run_item_type(Event, AgentRun)


# --- in-process messages (never on the wire: they carry objects) -------------------------


@dataclass(frozen=True, slots=True)
class RegisterAgent:
    """Registers `agent` with the service (an embedded tree's `register_agent`)."""

    agent: Agent
    replace: bool = False


@dataclass(frozen=True, slots=True)
class StartAgentObject:
    """Starts a run of the `agent` object itself for `owner`, without registering it
    (an embedded tree's `run_agent`): answered with `AgentRunStarted`."""

    agent: Agent
    request: StartAgentRun
    owner: Owner


@dataclass(frozen=True, slots=True)
class DelegateAgentRun:
    """Starts a run of the catalogue agent `request.name` for `owner` on behalf of a
    delegating tool call (`phloem.actors.agents.delegation`): answered with
    `AgentRunStarted`; `on_end` gets the finished `AgentRun` (None: the run crashed), in
    the service's thread, once its driver is gone."""

    request: StartAgentRun
    owner: Owner
    on_end: Callable[[AgentRun | None], None]
