"""The tree's `Delegate`: a delegated agent call as a run of the `agents` service.

`AgentDelegation.run(call)` starts the named agent as a run of the one run lifecycle
(`DelegateAgentRun` to `agents/service`), owned by an owner of its own labelled after the
caller (`delegation:<caller>`, as `phloem runs` shows it), and waits for the run's end.
The caller's cancel, or `[agents] delegation_timeout_s` (or the call's own, shorter
timeout), puts that owner down — which cancels the run as any vanished owner does — and
the call answers `cancelled` / `timeout` once the run has stopped (at most `STOP_WAIT_S`
later). No one follows a delegated run's stream (its events wait in its record, bounded)
and no one can confirm its tool calls: a delegated agent with `confirmation = true` has
its mutating calls refused (`not_confirmed`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pykka

from phloem.actors.agents.protocol import DelegateAgentRun, StartAgentRun
from phloem.agents.delegation import Delegation
from phloem.agents.runner import AgentRun
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision.refs import Owner, OwnerRegistry

START_TIMEOUT_S = 10.0
"""How long a delegation waits for the `agents` service to start its run."""
STOP_WAIT_S = 10.0
"""How long a cancelled or timed-out delegation waits for its run to stop."""
POLL_S = 0.05
"""How often a waiting delegation looks at its caller's cancel."""
MAX_LABEL_CHARS = 80


class AgentDelegation:
    """Runs delegated agent calls through the `agents` service `actor` (see the module
    docstring); `timeout_s` is read at each call, so a reload's new value holds."""

    def __init__(
        self,
        actor: pykka.ActorRef[Any],
        refs: OwnerRegistry,
        timeout_s: Callable[[], float],
    ) -> None:
        self._actor = actor
        self._refs = refs
        self._timeout_s = timeout_s

    def run(self, call: Delegation) -> AgentRun:
        owner = Owner("actor", f"delegation:{call.label}"[:MAX_LABEL_CHARS])
        ended = threading.Event()
        box: list[AgentRun | None] = []

        def on_end(run: AgentRun | None) -> None:
            box.append(run)
            ended.set()

        request = StartAgentRun(call.agent, call.input, dict(call.state))
        try:
            self._actor.ask(DelegateAgentRun(request, owner, on_end), timeout=START_TIMEOUT_S)
        except pykka.ActorDeadError:
            raise PhloemError(ErrorKind.NOPROC, "the agents service is not running") from None
        except pykka.Timeout:
            late = f"the agents service did not start the run in {START_TIMEOUT_S} s"
            raise PhloemError(ErrorKind.TIMEOUT, late) from None
        timeout_s = self._timeout_s()
        if call.timeout_s is not None:
            timeout_s = min(timeout_s, call.timeout_s)
        deadline = time.monotonic() + timeout_s
        why: PhloemError | None = None
        while not ended.wait(POLL_S):
            if call.cancel.is_set():
                why = PhloemError(ErrorKind.CANCELLED, "the delegating call was cancelled")
            elif time.monotonic() >= deadline:
                why = PhloemError(ErrorKind.TIMEOUT, f"no end within {timeout_s} s")
            if why is not None:
                self._refs.owner_down(owner, why.message)  # cancels the run
                ended.wait(STOP_WAIT_S)
                raise why
        self._refs.owner_down(owner)  # nothing is left to hold: the owner is done
        run = box[0]
        if run is None:
            raise PhloemError(ErrorKind.RUN_CRASHED, f"the run of {call.agent} crashed")
        return run
