"""Messages of the `agents` service, shared by the service and the client methods.

Requests are a tagged union (`AgentRequest`); a run's stream carries `AgentStreamItem`s:
`AgentRunEvent` for every event as it happens, then one `AgentRunEnd` with the run's
outcome and final state (its `events` are empty: they were sent one by one; the client
puts them back). A stream that ends without `AgentRunEnd` is `run_incomplete`. With
confirmation on, a `ConfirmRequest` (kind `confirm`) asks the owner about a mutating
tool call; the owner answers with `ConfirmAgentRun(ref, call_id, approve)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from phloem.agents.agent import Agent
from phloem.agents.events import Event
from phloem.agents.runner import AgentRun
from phloem.instructions.protocol import ConfirmRequest
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
    subscribe_wait_s: float = 5.0
    # This run's own tool policy, intersected with the agent's (denials win).
    tools_allow: list[str] | None = None
    tools_deny: list[str] = []


class CancelAgentRun(msgspec.Struct, frozen=True, tag="cancel"):
    ref: str


class ConfirmAgentRun(msgspec.Struct, frozen=True, tag="confirm"):
    """The run owner's answer to a `ConfirmRequest` on the run's stream."""

    ref: str
    call_id: str
    approve: bool


AgentRequest = ListAgents | PlanAgent | StartAgentRun | CancelAgentRun | ConfirmAgentRun


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


class AgentRunEvent(msgspec.Struct, frozen=True, tag="event"):
    event: Event


class AgentRunEnd(msgspec.Struct, frozen=True, tag="end"):
    run: AgentRun


AgentStreamItem = AgentRunEvent | AgentRunEnd | ConfirmRequest


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
