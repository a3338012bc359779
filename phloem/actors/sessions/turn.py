"""One turn of a session: drive its agent over the durable session, fold what happened
into an `AskResult`.

The agent was built for this turn on the session's workspace (keyed by the session for the
read ledger and the output budget); a cancel of the run's `CancelToken` reaches the tool
call in flight (a running `bash` is stopped: its process group) and the model call in
flight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phloem.actors.sessions.results import AskResult, TurnFold, UsageMeter
from phloem.agents.context import CancelToken
from phloem.agents.conversation import ConversationAgent
from phloem.agents.events import Event
from phloem.agents.executor import InlineExecutor
from phloem.agents.preparation import RunPrep
from phloem.agents.runner import run_agent
from phloem.models.interceptors import Interceptor, Interceptors
from phloem.protocols.content import Content
from phloem.protocols.errors import ErrorKind, ErrorValue
from phloem.protocols.warnings import RunWarning

if TYPE_CHECKING:
    from phloem.actors.sessions.durable import DurableSessionService


@dataclass
class Turn:
    """Everything one turn needs (the service fills it in)."""

    store: DurableSessionService
    session_id: str
    prompt: str
    agent: ConversationAgent
    prep: RunPrep
    tree: Interceptors
    compaction: Interceptor | None = None
    # A turn a crash interrupted, continued from its transcript (`resume`): no new prompt.
    resume: bool = False


def run_turn(
    turn: Turn,
    token: CancelToken,
    on_event: Callable[[Event], None] | None = None,
    run_warnings: Callable[[], list[RunWarning]] | None = None,
) -> AskResult:
    """Run one turn to its end (the caller holds the session's run lease)."""
    store = turn.store
    session = store.get_session(turn.session_id)
    meter = UsageMeter()
    agent = turn.agent
    if on_event is not None:
        show = on_event

        def on_text(text: str) -> None:
            show(Event(author=agent.name, content=Content.model(text), partial=True))

        agent.on_text = on_text
    inner = (meter,) if turn.compaction is None else (meter, turn.compaction)
    run = run_agent(
        agent,
        input=None if turn.resume else turn.prompt,
        sessions=store,
        session=session,
        app=session.app,
        user=session.user,
        executor=InlineExecutor(),
        cancel=token,
        on_event=on_event,
        interceptors=turn.prep.chain(turn.tree, *inner),
    )
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
