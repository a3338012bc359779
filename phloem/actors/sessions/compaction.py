"""Compaction of a session's model requests: the model-call interceptor of a run.

Before each model call the request goes through the session's `CompactionSession`
(`phloem.protocols.compaction`): sticky decisions from the session's `compaction`
sidecar are applied again, and new ones are made when the estimate reaches the trigger
(the session's output budget is then reset). After the call the estimator is calibrated
with the prompt tokens the provider reported. The transcript itself is never changed:
only what is sent. Warnings (`compaction_sidecar_load`, `compaction_budget_exhausted`,
`compaction_sidecar_save`) go to the session and come back in the next `AskResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.actors.sessions.protocol import CompactionMarks
from phloem.agents.conversation import close_calls
from phloem.agents.events import Event
from phloem.agents.settings import LlmAgentConfig
from phloem.models.interceptors import CallInfo, Interceptor
from phloem.protocols.compaction import CompactionSession, Policy, State, decisions_in
from phloem.protocols.content import Content, ModelRequest, ModelResponse
from phloem.protocols.tokens import content_from_wire, wire_content, wire_request
from phloem.protocols.warnings import RunWarning
from phloem.tools.outputlimit import OutputBudget

if TYPE_CHECKING:
    from phloem.actors.sessions.durable import DurableSessionService

SIDECAR_KIND = "compaction"


def policy_of(agent: LlmAgentConfig) -> Policy:
    return Policy(
        context_tokens=agent.context_tokens,
        trigger_fraction=agent.trigger_fraction,
        target_fraction=agent.target_fraction,
        keep_recent_contents=agent.keep_recent_contents,
        minimum_elision_tokens=agent.minimum_elision_tokens,
        preserve_tool_names=tuple(agent.preserve_tool_names),
        calibration=agent.calibration,
    )


def marks(events: Sequence[Event], sidecar: object) -> CompactionMarks | None:
    """Where the sticky decisions of `sidecar` (the session's `compaction` sidecar) fall
    among `events`, which are rebuilt into a request's contents as the session's agent
    builds them; None without decisions (or without a readable sidecar)."""
    try:
        state = State.from_json(sidecar)
    except ValueError:
        return None
    if not (state.elided_responses or state.dropped_turns or state.exhausted_warned):
        return None
    sent = [e for e in events if e.content is not None and e.content.parts and e.error is None]
    owner: dict[int, str] = {}
    for event in sent:
        assert event.content is not None
        owner[id(event.content)] = event.id
    contents: list[Content] = close_calls([e.content for e in sent if e.content is not None])
    elided, dropped = decisions_in([wire_content(c) for c in contents], state)

    def ids(indices: set[int]) -> list[str]:
        found = (owner.get(id(contents[i])) for i in sorted(indices))
        return list(dict.fromkeys(x for x in found if x is not None))

    return CompactionMarks(
        elided=ids(elided),
        dropped=ids(dropped),
        calibration=state.calibration,
        exhausted=state.exhausted_warned,
    )


class SessionCompaction(Interceptor):
    """Keeps one session's requests inside its agent's `context_tokens`."""

    name = "compaction"

    def __init__(
        self,
        policy: Policy,
        store: DurableSessionService,
        session_id: str,
        budget: OutputBudget | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.budget = budget
        path = str(store.transcript_path(session_id))

        def warn(code: str, message: str) -> None:
            store.warn(session_id, RunWarning.of(code, message, path=path))

        self.session = CompactionSession(
            policy,
            lambda: store.sidecar(session_id, SIDECAR_KIND),
            lambda state: store.save_sidecar(session_id, SIDECAR_KIND, state),
            warn,
        )

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        wire: dict[str, Any] = wire_request(request)
        contents = wire.pop("contents")
        result = self.session.prepare(contents, wire)
        if result.triggered and self.budget is not None:
            self.budget.reset(self.session_id)
        if result.changed:
            request = msgspec.structs.replace(
                request, contents=tuple(content_from_wire(c) for c in result.contents)
            )
        response = proceed(request)
        if response.usage is not None:
            self.session.observe(response.usage.input_tokens, result.contents, wire)
        return response
