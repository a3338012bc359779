"""The `sessions` service: durable sessions and their runs, one run per session.

Requests (`protocol.py`): `NewSession(agent, workdir, session_id)`, `RunSession(session_id,
prompt, tools_allow, tools_deny)`, `CancelSession`, `ListSessions`, `ShowSession`,
`DeleteSession`, `ConfirmSession(session_id, call_id, approve)`. Sessions are
durable, named state and belong to no client; a *run* does: `RunSession` answers
`SessionRunStarted(ref, stream)` at once, a run of the one run lifecycle
(`phloem.actors.runs`) with a ref bound to the calling client, so a client that goes away
cancels its run (as `CancelSession` does). A second run of a busy session is
`session_busy`. The stream `sessions/<ref>` carries the turn's events (`agent_event`
`RunEvent`s) under credit, then a `RunEnd` with the `AskResult`.

A session's agent is an `[agents.llm.NAME]` entry of the one agent catalogue
(`ServiceContext.resources.agents`): for every turn it is built anew
(`phloem.agents.preparation.prepare`) as a `ConversationAgent` on the session's workspace,
with the tools the one tool assembly gives it (coding tools with LSP diagnostics, MCP
tools, component tools, skills) and what its capabilities add: the workspace's
instructions in the model request (kept per session across turns), `/name args` prompt
templates, the tool policy (the agent's `tools_allow` / `tools_deny` ∩ the turn's), and
with `confirmation = true` a `ConfirmRequest` on the stream before each mutating tool
call, answered by the run's owner (`ConfirmSession`); warnings join `AskResult.warnings`.
With `context_tokens` > 0 its requests are compacted.
In the tree the service is `sessions/service`; every live run is a driver actor (a
`RunDriver`) under `sessions/runs`. A turn a crash cut short resumes when the service
starts (`resume`: its marker in the transcript, under `max_concurrent_runs`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from phloem.actors.runs import Run, RunDriver, ServiceRuns, outcome_of
from phloem.actors.services import Call, ServiceActor, ServiceContext, register_service
from phloem.actors.sessions import resume
from phloem.actors.sessions.compaction import SIDECAR_KIND, SessionCompaction, marks, policy_of
from phloem.actors.sessions.durable import DurableSessionService, SessionInfo
from phloem.actors.sessions.protocol import (
    CancelSession,
    ConfirmSession,
    DeleteSession,
    ListSessions,
    NewSession,
    RunSession,
    SessionDetail,
    SessionRequest,
    SessionRunStarted,
    SessionSummary,
    ShowSession,
)
from phloem.actors.sessions.recent import RecentWarnings
from phloem.actors.sessions.results import AskResult
from phloem.actors.sessions.turn import Turn, run_turn
from phloem.agents.context import CancelToken
from phloem.agents.conversation import ConversationAgent
from phloem.agents.events import Event
from phloem.agents.preparation import RunPrep, SessionPlace, prepare
from phloem.agents.public import event_note, public_event
from phloem.base.logs import get_logger
from phloem.instructions.policy import ToolPolicy
from phloem.instructions.session_contexts import SessionContexts
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.refs import RefKind
from phloem.protocols.runs import ConfirmRequest
from phloem.protocols.secrets import prune_secrets
from phloem.protocols.warnings import RunWarning, Warnings
from phloem.supervision import (
    ChildHandle,
    ChildSpec,
    ExitReason,
    Supervisor,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    sibling_of,
)
from phloem.supervision.refs import Owner
from phloem.tools.contract import ToolContext
from phloem.tools.workspace import Workspace

log = get_logger("phloem.sessions")

SERVICE_NAME = "sessions"
SERVICE_ID = "service"
RUNS_ID = "runs"
SERVICE_PATH = f"{SERVICE_NAME}/{SERVICE_ID}"
RUN_REF_KIND = RefKind(
    "session_run",
    prefix="sessrun_",
    invalid_error=ErrorKind.INVALID_REF,
    not_owner_error=ErrorKind.NOT_OWNER,
)
MAX_WORKSPACES = 1_024  # sessions whose workspace (and read ledger) stays in memory
MAX_SHOW_EVENTS = 10_000


@dataclass
class _Run:
    """What the sessions service keeps of one turn (the lifecycle's `Run.context`)."""

    session_id: str
    token: CancelToken
    request: RunSession | None = None
    lifecycle: Run | None = None  # set when the run starts
    # What the turn adds to the tree's chain: tool policy, confirmation, instructions,
    # templates and their warnings (phloem.agents.preparation).
    prep: RunPrep | None = None


def drive(service: SessionsService, state: _Run, turn: Turn, run: Run) -> None:
    """The work of one turn (its `RunDriver`'s): mark the turn started in its transcript
    (`resume`), expand a `/name args` prompt, run the turn with each event to the run's
    stream, mark it ended, then the `AskResult` as the end. A resumed turn closes its
    unanswered tool call first and asks for no new prompt. The session's run lease is
    given back as soon as the turn is over."""
    prep = state.prep
    store = service.store
    drain = prep.drain if prep is not None else None

    def on_event(event: Event) -> None:
        public = public_event(event)
        run.emit("agent_event", public, event_note(public), record=not public.partial)

    result: AskResult | None = None
    resume.live(store, state.session_id, True)
    try:
        try:
            if turn.resume:  # its prompt is in the transcript already, expanded
                resume.close_unanswered(store, state.session_id, turn.agent.name)
            else:
                if state.request is not None:
                    events = len(store.get_session(state.session_id).events)
                    resume.mark_started(store, state.request, events)
                if prep is not None:
                    turn.prompt = prep.expand(turn.prompt)  # `/name args`
            result = run_turn(turn, run.token, on_event, drain)
        except PhloemError as exc:  # the expansion or the store under the turn failed
            log.warning("session_turn_failed", session=state.session_id, kind=exc.kind)
            result = AskResult(
                session_id=state.session_id,
                status="failed",
                error=exc.to_value(),
                warnings=drain() if drain is not None else [],
            )
    finally:  # the turn is over: the next may start as soon as this one's result is out
        if prep is not None:
            prep.close("the run ended")
        try:
            resume.mark_ended(store, state.session_id, result.status if result else "failed")
        except PhloemError as exc:
            log.warning("session_turn_mark_failed", session=state.session_id, kind=exc.kind)
        resume.live(store, state.session_id, False)
        store.release_run(state.session_id)
    service.recent.add(state.session_id, result.warnings)
    run.end(outcome_of(result.status), error=result.error, result=result)


class SessionsService(ServiceActor):
    """The `sessions` service (see the module docstring)."""

    request_type = SessionRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        cfg = ctx.config.sessions
        self.cfg = cfg
        self._store: DurableSessionService | None = None
        self.budget = ctx.config.tools.budget()
        self.instructions = SessionContexts(ctx.config.instructions, ctx.config.tools)
        self.runs = ServiceRuns.of(self, "session", RUN_REF_KIND, max_live=cfg.max_concurrent_runs)
        self.turns: dict[str, Run] = {}  # the live run of each busy session
        self._run_ids = itertools.count(1)
        self._workspaces: OrderedDict[str, Workspace] = OrderedDict()
        self.recent = RecentWarnings()  # each session's last warnings, for session_show
        self._lock = threading.Lock()
        self._workspace_lock = threading.Lock()
        self._sup: SupervisorRef | None = None
        self._own_sup: SupervisorRef | None = None
        self._to_resume: deque[tuple[str, dict[str, Any]]] = deque()  # interrupted turns

    @property
    def store(self) -> DurableSessionService:
        """The store, opened at the first request that needs it (a tree that never uses
        sessions never touches the session directory)."""
        with self._lock:
            if self._store is None:
                cfg = self.cfg
                self._store = DurableSessionService(
                    cfg.store_dir(), cfg.app, sync=cfg.fsync, max_events=cfg.max_events
                )
            return self._store

    def on_stop(self) -> None:
        self.runs.stop()
        if self._own_sup is not None:
            self._own_sup.stop(timeout=10.0)
        if self._store is not None:
            self._store.close()
        super().on_stop()

    # -- requests ------------------------------------------------------------------------

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, NewSession):
            return self._new(message)
        if isinstance(message, RunSession):
            return self._start(message, call.owner)
        if isinstance(message, CancelSession):
            self.store.get_session(message.session_id)  # unknown_session for a bad id
            run = self.turns.get(message.session_id)
            active = run is not None and self.store.busy(message.session_id)
            if run is not None and active:
                run.cancel("cancelled")
            return {"cancelled": active}
        if isinstance(message, ListSessions):
            return [self._summary(info) for info in self.store.infos()]
        if isinstance(message, ShowSession):
            return self._show(message)
        if isinstance(message, ConfirmSession):
            return self._confirm(message, call.owner)
        if isinstance(message, DeleteSession):
            deleted = self.store.delete_session(message.session_id)
            self.instructions.forget(message.session_id)
            with self._workspace_lock:
                self._workspaces.pop(message.session_id, None)
            self.budget.reset(message.session_id)
            self.recent.forget(message.session_id)
            return {"deleted": deleted}
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"unexpected request {type(message).__name__}")

    def _exited(self, run: Run, reason: ExitReason) -> None:
        """A turn's driver is gone (in this service's thread)."""
        state = run.context
        assert isinstance(state, _Run)
        if self.turns.get(state.session_id) is run:  # not a newer run of the session
            del self.turns[state.session_id]
        if self._to_resume:
            self._resume_more()

    # -- interrupted turns -----------------------------------------------------------------

    def on_start(self) -> None:
        """Find the turns a crashed daemon left unfinished (only in a store that exists: a
        tree that never used sessions never creates one) and resume them."""
        if self.cfg.store_dir().is_dir():
            self.later(self._find_unfinished)

    def _find_unfinished(self) -> None:
        try:
            self._to_resume.extend(resume.unfinished(self.store))
        except PhloemError as exc:
            log.error("session_resume_failed", kind=exc.kind)
            return
        self._resume_more()

    def _resume_more(self) -> None:
        """Resume interrupted turns under admission control: while the service has room
        (`max_concurrent_runs`), the next as one ends."""
        while self._to_resume and self.runs.live_count() < self.runs.max_live:
            session_id, marker = self._to_resume.popleft()
            try:
                self._resume_turn(session_id, marker)
            except PhloemError as exc:
                log.error("session_resume_failed", session=session_id, kind=exc.kind)
                with contextlib.suppress(PhloemError):
                    resume.mark_ended(self.store, session_id, "failed")

    def _resume_turn(self, session_id: str, marker: dict[str, Any]) -> None:
        how = resume.plan(self.store, session_id, marker)
        log.info("session_turn_resumed", session=session_id, plan=how.plan)
        if how.plan == "done":
            resume.mark_ended(self.store, session_id, "done")
            return
        allow = marker.get("tools_allow")
        request = RunSession(
            session_id,
            how.prompt or "(resumed)",
            tools_allow=[str(t) for t in allow] if isinstance(allow, list) else None,
            tools_deny=[str(t) for t in marker.get("tools_deny") or []],
        )
        owner = Owner.client(f"resumed turn {session_id}")
        self._start(request, owner, resume=how.plan == "continue")

    def _new(self, request: NewSession) -> SessionSummary:
        name = request.agent or self.cfg.default_agent
        self.ctx.resources.catalogue().llm_spec(name)  # unknown_agent for a bad name
        workdir = request.workdir or self.cfg.workdir or os.getcwd()
        if not os.path.isabs(workdir):
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, "workdir must be an absolute path")
        if not os.path.isdir(workdir):
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"workdir is not a directory: {workdir}")
        meta = {"agent": name, "workdir": os.path.realpath(workdir)}
        session = self.store.create_session(
            self.cfg.app, self.cfg.user, session_id=request.session_id, meta=meta
        )
        log.info("session_created", session=session.id, agent=name)
        return self._summary(self.store.info(session.id))

    def _start(
        self, request: RunSession, owner: Owner, *, resume: bool = False
    ) -> SessionRunStarted:
        if not request.prompt.strip():
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, "prompt must not be empty")
        if len(request.prompt) > self.cfg.max_prompt_chars:
            raise PhloemError(
                ErrorKind.INVALID_ARGUMENT,
                f"prompt must be at most {self.cfg.max_prompt_chars} chars",
            )
        sid = request.session_id
        header = self.store.header(sid)
        self.runs.check_room()
        state = _Run(sid, CancelToken(), request=None if resume else request)
        turn = self._turn(sid, header.meta, request.prompt, state, request)
        turn.resume = resume
        self.store.acquire_run(sid)

        def launch(run: Run) -> ChildHandle:
            state.lifecycle = run
            work = functools.partial(drive, self, state, turn)
            return self.runs_supervisor().start_child(
                ChildSpec(
                    f"run:{sid}#{next(self._run_ids)}",
                    (RunDriver, (run, work), {}),
                    restart="temporary",
                    shutdown=15.0,
                )
            )

        try:
            run = self.runs.start(
                owner, sid, launch, context=state, token=state.token, on_exit=self._exited
            )
        except Exception:
            self.store.release_run(sid)
            raise
        self.turns[sid] = run
        return SessionRunStarted(run.ref, run.stream, sid)

    def _turn(
        self, session_id: str, meta: dict[str, Any], prompt: str, run: _Run, request: RunSession
    ) -> Turn:
        """The turn's agent, built from the catalogue on the session's workspace, with what
        it adds to the tree's chain; an unknown `/name` fails now, not in the run."""
        name = str(meta.get("agent") or self.cfg.default_agent)
        catalogue = self.ctx.resources.catalogue()
        spec = catalogue.llm_spec(name)
        workdir = str(meta.get("workdir") or os.getcwd())

        def send(item: ConfirmRequest) -> None:
            assert run.lifecycle is not None
            run.lifecycle.confirm(item)

        # The tools' own warnings (a malformed .gitignore rule seen by grep) go to the
        # turn's warnings, so they come back in its AskResult like every other warning.
        collected: list[Warnings] = []

        def tool_warning(warning: RunWarning) -> None:
            if collected:
                collected[0].add(warning)

        place = SessionPlace(
            ToolContext(
                workspace=self._workspace(session_id, workdir),
                session=session_id,
                policy=self.ctx.config.tools.output_policy(),
                budget=self.budget,
                on_warning=tool_warning,
            ),
            context=lambda: self.instructions.context(session_id, workdir),
            variables={"session_id": session_id},
            skills=lambda found: self.instructions.skills(session_id, workdir, found),
            templates=lambda found: self.instructions.templates(session_id, workdir, found),
        )
        try:
            prep = prepare(
                catalogue,
                name,
                policy=ToolPolicy.of(request.tools_allow, request.tools_deny),
                send=send,
                session=place,
            )
        except ValueError as exc:  # the session's workspace went away since
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"agents.llm.{name}: {exc}") from None
        run.prep = prep
        collected.append(prep.warnings)
        prep.check(prompt)
        confirm = prep.confirm
        if confirm is not None:
            run.token.on_cancel(lambda: confirm.close(f"run cancelled: {run.token.reason}"))
        compaction = None
        if spec.config.context_tokens > 0:
            compaction = SessionCompaction(
                policy_of(spec.config), self.store, session_id, self.budget
            )
        assert isinstance(prep.agent, ConversationAgent)
        return Turn(
            store=self.store,
            session_id=session_id,
            prompt=prompt,
            agent=prep.agent,
            prep=prep,
            tree=self.ctx.interceptors.chain(),
            compaction=compaction,
        )

    def _confirm(self, request: ConfirmSession, owner: Owner) -> dict[str, Any]:
        """The run owner's answer to a confirmation (`not_owner` for anyone else)."""
        run = self.turns.get(request.session_id)
        if run is None:
            self.store.header(request.session_id)  # unknown_session for a bad id
            raise PhloemError(
                ErrorKind.UNKNOWN_CALL, f"session {request.session_id!r} has no active run"
            )
        state = self.runs.resolve(run.ref, owner).context
        assert isinstance(state, _Run)
        confirm = state.prep.confirm if state.prep is not None else None
        if confirm is None or not confirm.answer(request.call_id, request.approve):
            raise PhloemError(
                ErrorKind.UNKNOWN_CALL,
                f"no tool call {request.call_id[:80]!r} is waiting for confirmation",
            )
        return {"call_id": request.call_id, "approve": request.approve}

    def _workspace(self, session_id: str, root: str) -> Workspace:
        with self._workspace_lock:
            workspace = self._workspaces.get(session_id)
            if workspace is None or str(workspace.root) != os.path.realpath(root):
                try:
                    workspace = Workspace(root)
                except ValueError as exc:
                    raise PhloemError(ErrorKind.INVALID_ARGUMENT, str(exc)) from None
                self._workspaces[session_id] = workspace
            self._workspaces.move_to_end(session_id)
            while len(self._workspaces) > MAX_WORKSPACES:
                self._workspaces.popitem(last=False)
            return workspace

    def _summary(self, info: SessionInfo) -> SessionSummary:
        return SessionSummary(
            id=info.id,
            agent=str(info.meta.get("agent", "")),
            workdir=str(info.meta.get("workdir", "")),
            created=info.created,
            updated=info.updated,
            transcript=info.path,
            busy=self.store.busy(info.id),
            events=self.store.event_count(info),
        )

    def _show(self, request: ShowSession) -> SessionDetail:
        limit = check_range(
            "max_events", request.max_events, 1, MAX_SHOW_EVENTS, kind=ErrorKind.BAD_MESSAGE
        )
        session = self.store.get_session(request.session_id)
        events = session.events
        summary = self._summary(self.store.info(session.id))
        catalogue = self.ctx.resources.catalogue()
        spec = catalogue.spec(summary.agent or self.cfg.default_agent)
        model = catalogue.model(spec) if spec is not None else None
        return SessionDetail(
            summary=summary,
            state=prune_secrets(session.state),
            events=[public_event(e) for e in events[-limit:]],
            event_count=len(events),
            provider=model.provider if model is not None else "",
            model=model.model if model is not None else "",
            missing_key_env=model.missing_key_env if model is not None else "",
            templates=bool(spec is not None and spec.templates),
            compaction=marks(events, self.store.sidecar(session.id, SIDECAR_KIND)),
            warnings=self.recent.snapshot(session.id),
        )

    def runs_supervisor(self) -> SupervisorRef:
        """The `runs` supervisor next to this service (outside a tree, one of its own)."""
        if self._sup is None or not self._sup.is_alive():
            handle = self._phloem_handle
            sibling = sibling_of(handle, RUNS_ID) if handle is not None else None
            if not isinstance(sibling, SupervisorRef):
                self._own_sup = Supervisor.start(
                    SupervisorSpec(strategy="one_for_one", intensity=0), [], name="sessions.runs"
                )
                sibling = self._own_sup
            self._sup = sibling
        return self._sup


def sessions_factory(ctx: ServiceContext) -> ChildSpec:
    """`sessions`: a supervisor holding `runs` (one driver per live run) and `service`."""
    return ChildSpec(
        SERVICE_NAME,
        SupervisorChild(
            SupervisorSpec(strategy="one_for_one", intensity=3),
            [
                ChildSpec(RUNS_ID, SupervisorChild(SupervisorSpec(intensity=0))),
                ChildSpec(SERVICE_ID, (SessionsService, (ctx,), {}), shutdown=20.0),
            ],
        ),
    )


register_service(SERVICE_NAME, sessions_factory)

__all__ = ["SERVICE_PATH", "SessionsService", "sessions_factory"]
