"""A session turn that a crash interrupted resumes from its last acknowledged event.

Every turn writes a marker in its session's transcript (a `turn` sidecar record, synced
like every record) when it starts — `{"state": "running", "prompt", "tools_allow",
"tools_deny", "events"}`, `events` the session's event count before the turn — and
another when it ends (`{"state": "ended", "status"}`). A marker still `running` when
the sessions service starts is a turn the previous daemon did not finish. Its session
already holds every event the turn had acknowledged, so resuming it (`plan`) means:

- no event after `events`: the crash came before the turn's prompt was recorded — the
  turn runs as it would have, from its prompt;
- the last event is the model's final answer (a reply without tool calls): the turn had
  finished and only its end marker is missing — it is marked ended, nothing runs;
- otherwise the agent loop continues from the transcript: a tool call without its
  response is closed as `interrupted` (an event in the transcript, `close_unanswered`;
  the tool is never run again — it may not be idempotent), and the model is asked for
  the rest. A model call in flight at the crash had no acknowledged answer: it is asked
  again, never one it had answered.

A turn whose driver still runs in this process (`live`: a sessions service restarted by
its supervisor beside its turns) is never resumed a second time; another daemon on the
same store is refused at its start (the store lock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from phloem.agents.conversation import INTERRUPTED
from phloem.agents.events import Event
from phloem.protocols.content import Content, Part

if TYPE_CHECKING:
    from phloem.actors.sessions.durable import DurableSessionService
    from phloem.actors.sessions.protocol import RunSession

TURN_SIDECAR = "turn"
RUNNING = "running"
ENDED = "ended"

_live_lock = threading.Lock()
_live: set[tuple[str, str]] = set()  # (store path, session id) of turns this process runs


def live(store: DurableSessionService, session_id: str, running: bool) -> None:
    """Note that this process runs (or no longer runs) a turn of `session_id`: a service
    restarted beside its still running turns must not resume them a second time."""
    key = (str(store.root), session_id)
    with _live_lock:
        if running:
            _live.add(key)
        else:
            _live.discard(key)


def mark_started(store: DurableSessionService, request: RunSession, events: int) -> None:
    """The turn of `request` begins (synced before its prompt is recorded)."""
    marker = {
        "state": RUNNING,
        "prompt": request.prompt,
        "tools_allow": request.tools_allow,
        "tools_deny": list(request.tools_deny),
        "events": events,
        "at": time.time(),
    }
    store.save_sidecar(request.session_id, TURN_SIDECAR, marker)


def mark_ended(store: DurableSessionService, session_id: str, status: str) -> None:
    store.save_sidecar(session_id, TURN_SIDECAR, {"state": ENDED, "status": status})


def unfinished(store: DurableSessionService) -> list[tuple[str, dict[str, Any]]]:
    """Every session whose last turn marker is still `running`, oldest session first."""
    found = []
    for info in store.infos():
        with _live_lock:
            if (str(store.root), info.id) in _live:
                continue  # its driver is alive in this process
        try:
            marker = store.sidecar(info.id, TURN_SIDECAR)
        except Exception:  # a corrupt transcript is `session show`'s to report
            continue
        if isinstance(marker, dict) and marker.get("state") == RUNNING:
            found.append((info.id, marker))
    return found


Plan = Literal["rerun", "done", "continue"]


@dataclass(frozen=True)
class Resumption:
    """How an interrupted turn goes on (see the module docstring)."""

    plan: Plan
    prompt: str


def plan(store: DurableSessionService, session_id: str, marker: dict[str, Any]) -> Resumption:
    events = store.get_session(session_id).events
    prompt = str(marker.get("prompt") or "")
    before = int(marker.get("events") or 0)
    if len(events) <= before:
        return Resumption("rerun", prompt)
    last = _last_content(events)
    if last is not None and last.role == "model" and not last.function_calls:
        return Resumption("done", prompt)
    return Resumption("continue", prompt)


def close_unanswered(store: DurableSessionService, session_id: str, author: str) -> int:
    """Answer every tool call of the session's last model reply that has no response with
    `INTERRUPTED` (recorded as an event); how many were closed."""
    session = store.get_session(session_id)
    last = _last_content(session.events)
    if last is None or last.role != "model" or not last.function_calls:
        return 0
    calls = last.function_calls  # the reply is the last content: none has its response
    parts = tuple(Part.from_function_response(c.name, dict(INTERRUPTED), id=c.id) for c in calls)
    store.append_event(session, Event(author=author, content=Content(role="user", parts=parts)))
    return len(parts)


def _last_content(events: Sequence[Event]) -> Content | None:
    for event in reversed(events):
        content = event.content
        if content is not None and content.parts and event.error is None:
            return content
    return None


__all__ = [
    "TURN_SIDECAR",
    "Resumption",
    "close_unanswered",
    "mark_ended",
    "mark_started",
    "plan",
    "unfinished",
]
