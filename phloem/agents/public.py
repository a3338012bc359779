"""Runs and events as they may leave the daemon: credential-shaped state keys pruned
(`api_key`, `password`, ...; token *counts* are kept), at every public boundary; and an
event's content-free note for the tree's record of runs (`event_note`)."""

from __future__ import annotations

import msgspec

from phloem.agents.events import Event
from phloem.agents.runner import AgentRun
from phloem.protocols.content import function_responses_of
from phloem.protocols.secrets import prune_secrets


def public_event(event: Event) -> Event:
    """`event` as it may leave the daemon: credential-shaped state keys pruned."""
    actions = event.actions
    if not actions.state_delta:
        return event
    delta = prune_secrets(actions.state_delta)
    if delta == actions.state_delta:
        return event
    return msgspec.structs.replace(
        event, actions=msgspec.structs.replace(actions, state_delta=delta)
    )


def event_note(event: Event) -> dict[str, str | int | bool | None]:
    """What the record of runs keeps of `event`: who, which invocation, the names of the
    tools it calls or answers, how many state keys it writes, its error kind and planner
    status — never its text, arguments, results or state values."""
    note: dict[str, str | int | bool | None] = {"author": event.author}
    if event.invocation_id:
        note["invocation"] = event.invocation_id
    content = event.content
    if content is not None:
        calls = [c.name for c in content.function_calls]
        if calls:
            note["calls"] = ", ".join(calls)
        answers = [r.name for r in function_responses_of(content.parts)]
        if answers:
            note["results"] = ", ".join(answers)
    if event.actions.state_delta:
        note["writes"] = len(event.actions.state_delta)
    if event.error is not None:
        note["error"] = event.error.kind
    if event.planner_status is not None:
        note["status"] = event.planner_status
    return note


def public_run(run: AgentRun) -> AgentRun:
    """`run` as it may leave the daemon (events and final state pruned of secrets)."""
    outcome = run.outcome
    if outcome.final_event is not None:
        outcome = msgspec.structs.replace(outcome, final_event=public_event(outcome.final_event))
    return msgspec.structs.replace(
        run,
        outcome=outcome,
        events=tuple(public_event(e) for e in run.events),
        state=prune_secrets(run.state),
    )
