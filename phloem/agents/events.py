"""Session events: what every agent emits, and the only way state changes.

An `Event` records who spoke (`author`), what was said (`content`, in the model content
shape) and what it does to session state (`actions`). Agents never write state directly:
a write is a `state_delta` (or a `state_remove`) on an event, applied when the event is
appended to the session. Events are frozen msgspec structs so they stream to clients
unchanged (JSON or msgpack).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import msgspec

from phloem.protocols.content import Content
from phloem.protocols.errors import ErrorValue


def new_event_id() -> str:
    """A unique event id (`ev-` + 16 hex digits)."""
    return f"ev-{secrets.token_hex(8)}"


def new_invocation_id() -> str:
    """A unique invocation id (`inv-` + 16 hex digits)."""
    return f"inv-{secrets.token_hex(8)}"


class EventActions(msgspec.Struct, frozen=True, omit_defaults=True):
    """What an event does besides speaking.

    `state_delta` sets keys, `state_remove` deletes keys (applied after the delta), and
    `escalate` asks an enclosing loop to stop.
    """

    state_delta: dict[str, Any] = msgspec.field(default_factory=dict)
    state_remove: tuple[str, ...] = ()
    escalate: bool = False


class Event(msgspec.Struct, frozen=True, omit_defaults=True):
    """One entry in a session's history.

    `error` is set when the author failed (the event then ends that agent's turn);
    `planner_status` is set only on the final event of a `PlannerAgent` run and holds its
    `PlannerOutcome.status`. `partial` marks a piece of a reply still being streamed: it
    is shown to whoever follows the run, never stored in a session (the complete reply
    comes as its own event).
    """

    author: str
    content: Content | None = None
    actions: EventActions = msgspec.field(default_factory=EventActions)
    id: str = msgspec.field(default_factory=new_event_id)
    timestamp: float = msgspec.field(default_factory=time.time)
    invocation_id: str = ""
    error: ErrorValue | None = None
    planner_status: str | None = None
    partial: bool = False

    @property
    def text(self) -> str:
        """The event's non-thought text ("" when it has none)."""
        return self.content.text if self.content is not None else ""

    @property
    def escalates(self) -> bool:
        return self.actions.escalate

    @classmethod
    def from_text(cls, author: str, text: str, **fields: Any) -> Event:
        """A model-role text event."""
        return cls(author=author, content=Content.model(text), **fields)


def describe(event: Event) -> str:
    """A one-line human rendering: `author: text`, with writes and errors noted."""
    bits = [event.text] if event.text else []
    calls = event.content.function_calls if event.content is not None else ()
    bits.extend(f"[call {c.name}]" for c in calls)
    if event.actions.state_delta:
        bits.append("[writes " + ", ".join(sorted(event.actions.state_delta)) + "]")
    if event.actions.state_remove:
        bits.append("[removes " + ", ".join(sorted(event.actions.state_remove)) + "]")
    if event.actions.escalate:
        bits.append("[escalate]")
    if event.error is not None:
        bits.append(f"[error {event.error.kind}: {event.error.message}]")
    return f"{event.author}: " + " ".join(bits)
