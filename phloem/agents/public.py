"""Runs and events as they may leave the daemon: credential-shaped state keys pruned
(`api_key`, `password`, ...; token *counts* are kept), at every public boundary."""

from __future__ import annotations

import msgspec

from phloem.agents.events import Event
from phloem.agents.runner import AgentRun
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
