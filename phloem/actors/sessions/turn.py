"""One turn of a session: build the run's agent, drive it over the durable session,
fold what happened into an `AskResult`.

The turn's tools run in a `ToolContext` whose `cancel` follows the run's `CancelToken`
(a cancel stops a running `bash` call: its process group is stopped), on the session's
workspace, keyed by the session for the read ledger and the output budget.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phloem.actors.sessions.harness import (
    AskResult,
    RunSetup,
    TurnFold,
    UsageMeter,
    build_agent,
    run_interceptors,
)
from phloem.agents.context import CancelToken
from phloem.agents.events import Event
from phloem.agents.executor import InlineExecutor
from phloem.agents.runner import run_agent
from phloem.models.interceptors import Interceptors
from phloem.protocols.content import Content
from phloem.protocols.errors import ErrorKind, ErrorValue
from phloem.protocols.model import Model
from phloem.protocols.warnings import RunWarning
from phloem.tools.contract import ToolContext
from phloem.tools.outputlimit import OutputBudget
from phloem.tools.workspace import Workspace

if TYPE_CHECKING:
    from phloem.actors.sessions.durable import DurableSessionService


@dataclass
class Turn:
    """Everything one turn needs (the service fills it in)."""

    store: DurableSessionService
    session_id: str
    prompt: str
    agent_name: str
    model: Model
    setup: RunSetup
    workspace: Workspace
    budget: OutputBudget
    tree: Interceptors
    max_tool_rounds: int


def linked_cancel(token: CancelToken) -> tuple[threading.Event, Callable[[], None]]:
    """A `threading.Event` set when `token` is cancelled, and the undo of that link."""
    event = threading.Event()
    token.on_cancel(event.set)
    return event, lambda: token.remove(event.set)


def run_turn(
    turn: Turn,
    token: CancelToken,
    on_event: Callable[[Event], None] | None = None,
    run_warnings: Callable[[], list[RunWarning]] | None = None,
) -> AskResult:
    """Run one turn to its end (the caller holds the session's run lease)."""
    store = turn.store
    session = store.get_session(turn.session_id)
    cancel, unlink = linked_cancel(token)
    tool_context = ToolContext(
        workspace=turn.workspace, session=turn.session_id, cancel=cancel, budget=turn.budget
    )
    meter = UsageMeter()
    setup = RunSetup(
        turn.setup.instruction,
        turn.setup.extra_instruction,
        turn.setup.tools,
        (meter, *turn.setup.interceptors),
    )
    on_text = None
    if on_event is not None:
        show = on_event

        def on_text(text: str) -> None:
            show(Event(author=turn.agent_name, content=Content.model(text), partial=True))

    agent = build_agent(
        turn.agent_name,
        turn.model,
        setup,
        tool_context,
        max_tool_rounds=turn.max_tool_rounds,
        on_text=on_text,
    )
    try:
        run = run_agent(
            agent,
            input=turn.prompt,
            sessions=store,
            session=session,
            app=session.app,
            user=session.user,
            executor=InlineExecutor(),
            cancel=token,
            on_event=on_event,
            interceptors=run_interceptors(turn.tree, setup),
        )
    finally:
        unlink()
    fold = TurnFold(agent.name).take_all(run.events)
    status, error = "done", None
    if token.cancelled:
        status = "cancelled"
        error = ErrorValue(kind=ErrorKind.CANCELLED, message=str(token.reason or "cancelled"))
    elif not run.ok or fold.error is not None:
        status = "failed"
        error = fold.error or run.outcome.error
    warnings = list(store.take_warnings(turn.session_id))
    if run_warnings is not None:
        warnings.extend(run_warnings())
    return AskResult(
        session_id=turn.session_id,
        text=fold.text,
        tool_calls=fold.calls,
        usage=meter.usage,
        warnings=warnings,
        status=status,
        error=error,
        model_calls=meter.model_calls,
        transcript=str(store.transcript_path(turn.session_id)),
    )
