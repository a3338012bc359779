"""The one run lifecycle: owner-bound runs, their event streams, and the tree's record.

A *run* is work a client starts, follows and may cancel: an agent run, a session turn, an
eval, a planning run. A feature's service keeps one `ServiceRuns` and starts each run
with it::

    run = self.runs.start(call.owner, name, launch, context=state)

`start` binds a fresh ref to the owner (another owner gets the kind's `not_owner`, a
malformed ref its `invalid_ref`; the owner going away cancels the run), opens the run's
event stream (`<prefix>/<ref>`, readable by that owner only), enters the run in the
tree's record (`RunLog`) and calls `launch(run)`, which starts the driver child under
the feature's `runs` supervisor — a `RunDriver` for work that blocks, which does it from
`on_start` (queued as its first message, so the start returns at once). A run never
waits for its subscriber: what it emits before the owner subscribes waits in its stream
(at most `RUN_RETAIN_MESSAGES` items and `RUN_RETAIN_BYTES`; the oldest are dropped,
counted, and announced to the subscriber with a `RunMissed`).

The driver reports through its `Run` (`phloem.protocols.runs` has the item shapes):
`emit(kind, data, note)` sends a `RunEvent` under the subscriber's credit and records
its content-free `note`; `confirm(request)` sends a `ConfirmRequest` (the confirmation
interceptor's `send`); `end(outcome, error=, result=)` sends the one `RunEnd`, records
the outcome and closes the stream. A subscriber that grants no credit for
`RUN_STREAM_SEND_TIMEOUT_S` fails the stream, which cancels the run: a run never
outlives the stream its owner reads. Cancelling goes through the run's `CancelToken`,
which the feature hands to what it runs — an `LlmAgent`'s model calls (their cancel
scope, `phloem.models.cancel`), the tools' `ToolContext.cancel`, an eval's case runs — so
the call in flight stops. A driver that exits without ending its run (a crash, a kill)
ends it `failed` (`run_crashed`). Then the ref is forgotten (a feature may keep it, as
planning does until its result is awaited) and the feature's `on_exit(run, reason)` runs
in its service's own thread.

A *durable* run (`start(..., journal=)`, `phloem.actors.runs.journal`) also has a durable
id (`run.durable_id`) and a journal its driver records each step in; its end is written
to the journal before the owner sees it. Its owner's connection is not its life: when
the owner goes away, or its stream fails, a durable run *detaches* (its stream is
dropped, the run goes on) instead of being cancelled, and `ServiceRuns.attach` binds it
to a new owner of the same uid with a fresh ref and stream (a run that has ended hands
the new stream its end at once). A resumed run starts detached, owned by a placeholder
owner of the journal's uid.

The record keeps the last `max_runs` runs and each one's last `max_events` notes, and
each run's telemetry trace id (that of the request that started it; "" without one). Any
client of the tree may read it, so a note holds only what `note_detail` lets through:
scalars, text cut to `MAX_NOTE_TEXT_CHARS` and redacted (`phloem.protocols.secrets`),
credential-shaped keys dropped — ids, names, counts and error kinds, never prompts,
inputs, outputs or state.

Size: one module on purpose — the lifecycle and the record are written together by
every run, under one sequence of events.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from phloem.actors.runs.journal import RunJournal, claim, release
from phloem.actors.streams import StreamHub, Topic
from phloem.agents.context import CancelToken
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.refs import RefKind
from phloem.protocols.runs import (
    MAX_NOTE_DETAILS,
    MAX_NOTE_TEXT_CHARS,
    ConfirmRequest,
    NoteValue,
    RunBegan,
    RunEnd,
    RunEvent,
    RunFinished,
    RunForgotten,
    RunMissed,
    RunNote,
    RunNoted,
    RunOutcome,
    RunSummary,
    RunUpdate,
)
from phloem.protocols.secrets import is_secret_key, redact
from phloem.supervision import fibers
from phloem.supervision.actor import Actor, tell_if_alive
from phloem.supervision.handle import ChildHandle
from phloem.supervision.light import tell_inline
from phloem.supervision.reasons import ExitReason
from phloem.supervision.refs import Owner, OwnerRegistry

log = get_logger("phloem.runs")

RUN_RETAIN_MESSAGES = 256
"""Items a run's stream keeps for an owner that has not subscribed yet."""
RUN_RETAIN_BYTES = 4 * 1024 * 1024
"""Bytes a run's stream keeps for an owner that has not subscribed yet."""
RUN_STREAM_SEND_TIMEOUT_S = 60.0
"""A subscriber that grants no room for this long fails the run's stream (and the run)."""
MAX_ENDED_REFS = 1024
"""Refs of ended runs a service remembers, so a cancel that crossed the end is no error."""

DEFAULT_RECENT_RUNS = 200
RECENT_RUNS_RANGE = (1, 100_000)
DEFAULT_RUN_EVENTS = 100
RUN_EVENTS_RANGE = (1, 10_000)
MAX_NOTE_KEY_CHARS = 40

Listener = Callable[[RunUpdate], bool]
"""Told every change of the record (under its lock, in order; it must not block);
returning False unsubscribes it."""


def note_text(value: str) -> str:
    """A text as the record may show it: redacted and cut to `MAX_NOTE_TEXT_CHARS`."""
    return redact(value, limit=MAX_NOTE_TEXT_CHARS)


def note_detail(detail: Mapping[str, Any] | None) -> dict[str, NoteValue]:
    """What of `detail` the record keeps: the first `MAX_NOTE_DETAILS` scalar entries,
    texts redacted and cut, credential-shaped keys and any other value left out."""
    kept: dict[str, NoteValue] = {}
    for key, value in (detail or {}).items():
        if len(kept) >= MAX_NOTE_DETAILS:
            break
        if not isinstance(key, str) or not key or is_secret_key(key, value):
            continue
        name = key[:MAX_NOTE_KEY_CHARS]
        if value is None or isinstance(value, bool | int | float):
            kept[name] = value
        elif isinstance(value, str):
            kept[name] = note_text(value)
    return kept


def owner_text(owner: Owner) -> str:
    return note_text(f"{owner.kind} {owner.label}".strip())


# --- the record -----------------------------------------------------------------------------


@dataclass(eq=False)
class RunEntry:
    """One run in the record (mutated under the record's lock)."""

    id: str
    kind: str
    name: str
    owner: str
    started_at: float
    notes: list[RunNote]  # the last `max_events` (a list: a deque's block is ~0.6 KiB)
    ended_at: float | None = None
    outcome: RunOutcome | None = None
    error: str | None = None
    count: int = 0
    dropped: int = 0
    trace_id: str = ""
    seq: int = 0  # its place in begin order

    def summary(self) -> RunSummary:
        return RunSummary(
            id=self.id,
            kind=self.kind,
            name=self.name,
            owner=self.owner,
            started_at=self.started_at,
            ended_at=self.ended_at,
            outcome=self.outcome,
            error=self.error,
            events=list(self.notes),
            event_count=self.count,
            events_dropped=self.dropped,
            trace_id=self.trace_id,
        )


class RunLog:
    """The tree's bounded record of recent runs, shared by every service (one per tree,
    `ServiceContext.resources.runs`), listed and followed through the `runs` service.

    At most `max_runs` runs are kept: beyond it the oldest ended run goes (the oldest
    run, when every kept one still runs). Each keeps its last `max_events` notes; the
    older ones are counted in `events_dropped`.
    """

    def __init__(
        self, max_runs: int = DEFAULT_RECENT_RUNS, max_events: int = DEFAULT_RUN_EVENTS
    ) -> None:
        self.max_runs = check_range("max_runs", max_runs, *RECENT_RUNS_RANGE)
        self.max_events = check_range("max_events", max_events, *RUN_EVENTS_RANGE)
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, RunEntry] = OrderedDict()
        self._ended: list[tuple[int, RunEntry]] = []  # ended runs by begin order (a heap)
        self._ids = itertools.count(1)
        self._listeners: list[Listener] = []
        self.forgotten = 0  # runs dropped beyond `max_runs`

    def begin(self, kind: str, name: str, owner: Owner, trace_id: str = "") -> RunEntry:
        with self._lock:
            seq = next(self._ids)
            entry = RunEntry(
                trace_id=trace_id,
                id=f"{kind}-{seq}",
                kind=kind,
                name=note_text(name),
                owner=owner_text(owner),
                started_at=time.time(),
                notes=[],
                seq=seq,
            )
            self._runs[entry.id] = entry
            self._tell(RunBegan(entry.summary()))
            while len(self._runs) > self.max_runs:
                victim = self._oldest_ended() or next(iter(self._runs.values()))
                del self._runs[victim.id]
                self.forgotten += 1
                self._tell(RunForgotten(victim.id))
        return entry

    def _oldest_ended(self) -> RunEntry | None:
        """The kept ended run that began first (no walk over the running ones)."""
        ended = self._ended
        while ended:
            entry = ended[0][1]
            if self._runs.get(entry.id) is entry:
                return entry
            heapq.heappop(ended)  # forgotten already
        return None

    def note(self, entry: RunEntry, note: RunNote) -> None:
        with self._lock:
            entry.count += 1
            if len(entry.notes) >= self.max_events:
                entry.dropped += 1
                del entry.notes[0]
            entry.notes.append(note)
            if self._runs.get(entry.id) is entry:
                self._tell(RunNoted(entry.id, note))

    def finish(self, entry: RunEntry, outcome: RunOutcome, error: str | None, at: float) -> None:
        with self._lock:
            entry.ended_at, entry.outcome, entry.error = at, outcome, error
            if self._runs.get(entry.id) is entry:
                heapq.heappush(self._ended, (entry.seq, entry))
                self._tell(RunFinished(entry.id, at, outcome, error))

    def discard(self, entry: RunEntry) -> None:
        """Forget a run that never started (its driver could not be launched)."""
        with self._lock:
            if self._runs.pop(entry.id, None) is not None:
                self._tell(RunForgotten(entry.id))

    def runs(self) -> list[RunSummary]:
        """Every kept run, oldest first."""
        with self._lock:
            return [e.summary() for e in self._runs.values()]

    def follow(self, listener: Listener) -> list[RunSummary]:
        """The record now; every change after it goes to `listener` until it returns
        False or `unfollow`."""
        with self._lock:
            self._listeners.append(listener)
            return [e.summary() for e in self._runs.values()]

    def unfollow(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def followers(self) -> int:
        with self._lock:
            return len(self._listeners)

    def _tell(self, update: RunUpdate) -> None:
        for listener in list(self._listeners):
            try:
                keep = listener(update)
            except Exception:
                log.exception("run_listener_failed")
                keep = False
            if not keep:
                self._listeners.remove(listener)


# --- one run ---------------------------------------------------------------------------------


class Run:
    """One owner-bound run, as its driver and its service see it (see the module docstring).

    `context` is the feature's own state of the run; `token` its cancellation; `ref` and
    `stream` what the start reply hands the owner.
    """

    def __init__(
        self,
        runs: ServiceRuns,
        owner: Owner,
        name: str,
        token: CancelToken,
        context: Any,
    ) -> None:
        self._runs = runs
        self.owner = owner
        self.name = name
        self.token = token
        self.context = context
        self.trace = telemetry.capture()  # the starting request's: the run is its child
        self.id = ""
        self.ref = ""
        self.stream = ""
        self.topic: Topic | None = None
        self.entry: RunEntry | None = None
        self.handle: ChildHandle | None = None
        self.outcome: RunOutcome | None = None
        self.stream_failed: str | None = None  # the kind of the send that failed
        self.journal: RunJournal | None = None  # a durable run's
        self.last_end: RunEnd[Any] | None = None
        self.key = 0  # its slot in its service's live runs
        # one sequence of items, numbered and sent in order (re-entrant: a cancel callback
        # run under it, when a send fails, may report to the run again)
        self._lock = threading.RLock()
        self._seq = 0

    @property
    def ended(self) -> bool:
        return self.outcome is not None

    @property
    def durable_id(self) -> str:
        """The durable id of a durable run ("" for any other)."""
        return self.journal.id if self.journal is not None else ""

    def cancel(self, reason: str = "cancelled") -> None:
        self.token.cancel(reason)

    def detach(self) -> None:
        """Drop the run's stream (its owner went away); the run goes on (durable runs)."""
        with self._lock:
            topic, self.topic = self.topic, None
        if topic is not None and not topic.closed:
            topic.forget()

    def retarget(self, topic: Topic) -> None:
        """Send what comes next to `topic` (a new owner's); an ended run sends it its end."""
        with self._lock:
            old, self.topic = self.topic, topic
            self.stream, self.stream_failed = topic.name, None
            end = self.last_end
        if old is not None and not old.closed:
            old.forget()
        if end is not None:
            topic.publish(end)
            topic.close()

    def emit(
        self,
        kind: str,
        data: Any,
        note: Mapping[str, Any] | None = None,
        *,
        record: bool = True,
    ) -> None:
        """Send one event to the owner (under credit) and record `note` (content-free
        details: see `note_detail`; `record=False`: not in the record, e.g. a piece of a
        reply still streaming). Dropped once the run has ended."""
        with self._lock:
            if self.outcome is not None:
                return
            self._seq += 1
            at = time.time()
            if record:
                self._record(self._seq, at, kind, note)
            self._send(RunEvent(self._seq, at, kind, data))

    def confirm(self, request: ConfirmRequest) -> None:
        """Ask the owner about a mutating tool call (`ConfirmationInterceptor`'s `send`);
        raises `PhloemError` when the request cannot reach the owner's stream."""
        with self._lock:
            if self.outcome is not None:
                raise PhloemError(ErrorKind.CLOSED, "the run has ended")
            self._seq += 1
            note = {"tool": request.tool, "agent": request.agent, "call_id": request.call_id}
            self._record(self._seq, time.time(), "confirm", note)
            if not self._send(request):
                raise PhloemError(
                    ErrorKind.CLOSED, f"the run's stream failed: {self.stream_failed}"
                )

    def end(
        self,
        outcome: RunOutcome,
        *,
        error: ErrorValue | None = None,
        result: Any = None,
        wait: bool = True,
        suspend: bool = False,
    ) -> bool:
        """Send the run's `RunEnd`, record the outcome, close the stream; False if it had
        ended already. `wait=False` never waits for the subscriber's credit. A durable
        run's end goes to its journal first — unless `suspend` (the daemon stops): then
        its journal stays unfinished, for the next daemon to resume."""
        with self._lock:
            if self.outcome is not None:
                return False
            self.outcome = outcome
            self._seq += 1
            at = time.time()
            if self.journal is not None and suspend:
                self.journal.close()
            elif self.journal is not None:  # durable before anyone is told
                try:
                    self.journal.finish(outcome, result)
                except PhloemError as exc:
                    log.error("run_journal_end_failed", run=self.id, kind=exc.kind)
            # recorded and its slot freed first: whoever reads the end sees them so
            self._runs._ending(self, outcome, None if error is None else error.kind, at)
            self.last_end = RunEnd(self._seq, at, outcome, error, result)
            self._send(self.last_end, wait)
            topic = self.topic
        if topic is not None:
            topic.close()
        return True

    def credit_in_use(self) -> int:
        topic = self.topic
        return topic.credit_in_use() if topic is not None and not topic.closed else 0

    def _record(self, seq: int, at: float, kind: str, note: Mapping[str, Any] | None) -> None:
        record, entry = self._runs.log, self.entry
        if record is not None and entry is not None:
            record.note(entry, RunNote(seq, at, note_text(kind), note_detail(note)))

    def _send(self, item: Any, wait: bool = True) -> bool:
        topic = self.topic
        if self.stream_failed is not None or topic is None:
            return False
        try:
            if wait:
                _send_when_room(topic, item)
            else:
                topic.publish(item)
        except PhloemError as exc:
            self.stream_failed = exc.kind
            log.warning("run_stream_failed", run=self.id, kind=exc.kind)
            if self.journal is not None:  # a durable run outlives its reader
                self.topic = None
            else:
                self.token.cancel(f"event stream failed: {exc.kind}")
            return False
        return True

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.name!r} {self.outcome or 'running'}>"


def _send_when_room(topic: Topic, item: Any) -> None:
    """Send under credit, waiting up to `RUN_STREAM_SEND_TIMEOUT_S` for room; a fiber
    that has to wait waits parked, the wait itself on an offload thread."""
    if fibers.current() is None:
        topic.send(item, timeout=RUN_STREAM_SEND_TIMEOUT_S)
        return
    try:
        topic.send(item, timeout=0.0)
    except PhloemError as exc:
        if exc.kind != ErrorKind.TIMEOUT:
            raise
        fibers.offload(topic.send, item, RUN_STREAM_SEND_TIMEOUT_S)


Launch = Callable[[Run], ChildHandle]
OnExit = Callable[[Run, ExitReason], None]
OnOwnerDown = Callable[[Run, ExitReason], None]


@dataclass
class _Hooks:
    on_exit: OnExit | None = None
    on_owner_down: OnOwnerDown | None = None


class ServiceRuns:
    """The runs of one feature's service: starts them (see the module docstring), finds
    them by ref for their owner, cancels them, and keeps at most `max_live` going at once
    (one more start is `backpressure`)."""

    def __init__(
        self,
        kind: str,
        ref_kind: RefKind,
        *,
        refs: OwnerRegistry,
        streams: StreamHub,
        log: RunLog | None,
        prefix: str,
        max_live: int,
        later: Callable[[Callable[[], None]], None] | None = None,
        keep_refs: bool = False,
    ) -> None:
        self.kind = kind
        self.ref_kind = refs.define_kind(ref_kind)  # idempotent across service restarts
        self.refs = refs
        self.streams = streams
        self.log = log
        self.prefix = prefix
        self.max_live = max_live
        self._later = later
        self.keep_refs = keep_refs
        self._lock = threading.Lock()
        self._live: dict[int, Run] = {}
        self._hooks: dict[int, _Hooks] = {}
        self._ids = itertools.count(1)
        # ref -> owner id of the last runs that ended and were forgotten: a cancel that
        # crossed its run's end is no error to that owner (at most MAX_ENDED_REFS).
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._durable: dict[str, Run] = {}  # durable id -> its run, until its driver exits

    @classmethod
    def of(
        cls,
        service: Any,
        kind: str,
        ref_kind: RefKind,
        *,
        max_live: int,
        keep_refs: bool = False,
    ) -> ServiceRuns:
        """The runs of `service` (a `ServiceActor`): the tree's refs, streams and record;
        `on_exit` hooks run in the service's thread; streams are named after it."""
        ctx = service.ctx
        return cls(
            kind,
            ref_kind,
            refs=ctx.refs,
            streams=ctx.streams,
            log=ctx.resources.runs,
            prefix=ctx.name,
            max_live=max_live,
            later=service.later,
            keep_refs=keep_refs,
        )

    # -- starting --------------------------------------------------------------------------

    def check_room(self) -> None:
        """`backpressure` when `max_live` runs are going (before building a run's parts;
        `start` checks again)."""
        with self._lock:
            live = len(self._live)
        if live >= self.max_live:
            raise PhloemError(
                ErrorKind.BACKPRESSURE,
                f"{live} {self.kind} runs live; the limit is {self.max_live}",
            )

    def start(
        self,
        owner: Owner,
        name: str,
        launch: Launch,
        *,
        context: Any = None,
        token: CancelToken | None = None,
        on_exit: OnExit | None = None,
        on_owner_down: OnOwnerDown | None = None,
        journal: RunJournal | None = None,
    ) -> Run:
        """Start a run of `name` for `owner`: ref, stream, record entry, then
        `launch(run)` (the driver child). Without `on_owner_down`, the owner going away
        cancels the run's token (a durable run, with its `journal`: detaches it)."""
        run = Run(self, owner, name, token or CancelToken(), context)
        key = run.key = next(self._ids)
        with self._lock:
            if len(self._live) >= self.max_live:
                raise PhloemError(
                    ErrorKind.BACKPRESSURE,
                    f"{len(self._live)} {self.kind} runs live; the limit is {self.max_live}",
                )
            self._live[key] = run
            self._hooks[key] = _Hooks(on_exit, on_owner_down)
        run.id = f"{self.kind}-{key}"
        try:
            if journal is not None:  # one driver per journal in this process
                if not claim(journal.path):
                    raise PhloemError(
                        ErrorKind.BACKPRESSURE, f"durable run {journal.id} is already running"
                    )
                run.journal = journal
            ref = self.refs.create(
                owner, run, functools.partial(self._owner_gone, key, run), self.ref_kind.name
            )
            run.ref = ref.text
            run.topic = self.streams.open(
                f"{self.prefix}/{ref.text}",
                owner=owner,
                missed=RunMissed,
                retain_messages=RUN_RETAIN_MESSAGES,
                retain_bytes=RUN_RETAIN_BYTES,
            )
            run.stream = run.topic.name
            if self.log is not None:
                run.entry = self.log.begin(self.kind, name, owner, trace_id_of(run))
                run.id = run.entry.id
            handle = launch(run)
        except BaseException:
            self._abort(key, run)
            raise
        run.handle = handle
        if journal is not None:
            with self._lock:
                self._durable[journal.id] = run
        handle.add_exit_callback(functools.partial(self._exited, key, run))
        log.info("run_started", run=run.id, name=run.name)
        return run

    def _abort(self, key: int, run: Run) -> None:
        """The start failed: nothing of the run stays."""
        with self._lock:
            self._live.pop(key, None)
            self._hooks.pop(key, None)
        if run.journal is not None:
            release(run.journal.path)
        if run.ref:
            self.refs.discard(run.ref)
        if run.topic is not None:
            run.topic.forget()
        if run.entry is not None and self.log is not None:
            self.log.discard(run.entry)

    # -- owners ----------------------------------------------------------------------------

    def resolve(self, ref: str, owner: Owner) -> Run:
        """The run behind `ref`, for its owner only (the ref kind's errors otherwise)."""
        run = self.refs.resolve(ref, owner, self.ref_kind.name)
        assert isinstance(run, Run)
        return run

    def cancel(self, ref: str, owner: Owner, reason: str = "cancelled by its owner") -> Run | None:
        """Cancel the run behind `ref` (its owner only); None when it has already ended
        (one of the last `MAX_ENDED_REFS` of this service): a cancel may cross the end."""
        try:
            run = self.resolve(ref, owner)
        except PhloemError:
            with self._lock:
                ended = self._ended.get(ref)
            if ended is not None and ended == owner.id:
                return None
            raise
        run.cancel(reason)
        return run

    def durable(self, durable_id: str) -> Run | None:
        """The live (or kept) run of that durable id, if this service has it."""
        with self._lock:
            return self._durable.get(durable_id)

    def attach(self, run: Run, owner: Owner) -> str:
        """Bind the durable `run` to `owner` too (the caller checked its uid): a fresh ref
        for it, and the run's stream moved to a new topic that owner reads; the ref."""
        ref = self.refs.create(owner, run, lambda reason: run.detach(), self.ref_kind.name)
        try:
            topic = self.streams.open(
                f"{self.prefix}/{ref.text}",
                owner=owner,
                missed=RunMissed,
                retain_messages=RUN_RETAIN_MESSAGES,
                retain_bytes=RUN_RETAIN_BYTES,
            )
        except BaseException:
            self.refs.discard(ref.text)
            raise
        run.retarget(topic)
        log.info("run_attached", run=run.id, durable_id=run.durable_id)
        return ref.text

    def release(self, run: Run, owner: Owner, ref: str | None = None) -> None:
        """The owner is done with an ended run it kept (planning's awaited result): forget
        its ref (`ref`: the one it attached with), and its stream if nobody read it."""
        self.refs.release(ref or run.ref, owner, self.ref_kind.name)
        if run.topic is not None and run.topic.stream.unread:
            run.topic.forget()

    def live(self) -> list[Run]:
        """The runs that have not ended yet, oldest first."""
        with self._lock:
            return list(self._live.values())

    def live_count(self) -> int:
        """How many runs have not ended yet, in constant time (an admission check or a
        run's end asks this on every start or exit: `live()` copies them all)."""
        with self._lock:
            return len(self._live)

    def stop(self, reason: str = "service stopping") -> None:
        """Cancel every live run (the service is stopping)."""
        for run in self.live():
            run.cancel(reason)

    # -- endings ---------------------------------------------------------------------------

    def _owner_gone(self, key: int, run: Run, reason: ExitReason) -> None:
        with self._lock:
            hooks = self._hooks.get(key)
        if hooks is not None and hooks.on_owner_down is not None:
            hooks.on_owner_down(run, reason)
        elif run.journal is not None:
            run.detach()
        else:
            run.cancel(f"owner gone: {reason}")

    def _ending(self, run: Run, outcome: RunOutcome, error: str | None, at: float) -> None:
        """The run ends: record its outcome and free its slot."""
        if self.log is not None and run.entry is not None:
            self.log.finish(run.entry, outcome, error, at)
        with self._lock:
            if self._live.get(run.key) is run:
                del self._live[run.key]
        log.info("run_ended", run=run.id, outcome=outcome, error=error)

    def _exited(self, key: int, run: Run, reason: ExitReason) -> None:
        """The driver is gone: a run it did not end is `run_crashed`; then forget the ref
        and run the feature's `on_exit` in its service's thread."""
        if not run.ended:
            why = ErrorValue(kind=ErrorKind.RUN_CRASHED, message=redact(f"driver exited: {reason}"))
            run.end("failed", error=why, wait=False)
        with self._lock:
            hooks = self._hooks.pop(key, None)
            if run.journal is not None and self._durable.get(run.journal.id) is run:
                del self._durable[run.journal.id]
        if run.journal is not None:
            release(run.journal.path)
        if not self.keep_refs:
            with self._lock:  # remembered before it is forgotten: no window in which a
                self._ended[run.ref] = run.owner.id  # crossing cancel finds neither
                while len(self._ended) > MAX_ENDED_REFS:
                    self._ended.popitem(last=False)
            self.refs.discard(run.ref)
        on_exit = hooks.on_exit if hooks is not None else None
        if on_exit is None:
            return
        if self._later is None:
            on_exit(run, reason)
        else:
            self._later(lambda: on_exit(run, reason))


# --- the driver -------------------------------------------------------------------------------


class _Work:
    __slots__ = ()


Work = Callable[[Run], None]


class RunDriver(Actor):
    """The driver child of one run whose work blocks: `work(run)` runs from `on_start`
    (queued as the driver's first message, so the start returns at once) on the driver's
    own thread, in the run's trace, and must end the run (`run.end`). Work that raises
    ends it `failed` (`run_crashed`); work that returns without ending it, `run_incomplete`."""

    max_inbox = 4

    def __init__(self, run: Run, work: Work) -> None:
        super().__init__()
        self.run = run
        self.work = work

    def on_start(self) -> None:
        self.actor_ref.tell(_Work())

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Work):
            self.exit(self._drive())
        return None

    def _drive(self) -> ExitReason:
        """Do the run's work; the driver's exit reason (normal unless the work raised)."""
        run = self.run
        reason = ExitReason.normal()
        try:
            with telemetry.use(run.trace):
                self.work(run)
        except Exception as exc:
            log.error("run_driver_failed", run=run.id, error=type(exc).__name__)
            text = redact(f"{type(exc).__name__}: {exc}")
            run.end("failed", error=ErrorValue(kind=ErrorKind.RUN_CRASHED, message=text))
            reason = ExitReason.from_exception(exc)
        if not run.ended:
            run.end(
                "failed",
                error=ErrorValue(
                    kind=ErrorKind.RUN_INCOMPLETE, message="the run's work returned without an end"
                ),
            )
        return reason

    def credit_in_use(self) -> int:
        return self.run.credit_in_use()


class _Done:
    __slots__ = ("reason",)

    def __init__(self, reason: ExitReason) -> None:
        self.reason = reason


class FiberDriver(RunDriver):
    """A `RunDriver` that owns no thread: a light actor whose work runs as a fiber
    (`phloem.supervision.fibers`), parked — no thread held — while it waits on a model,
    a confirmation or an offloaded call. It is the same child in the tree (the run's
    `driver`), with the same ends; the fiber's end is told back to the actor, which then
    exits with the work's reason. Stopping it (a supervisor's shutdown) cancels the run,
    so the parked work wakes and ends it. For work that blocks only through
    `fibers.wait`/`fibers.offload` (`Agent.fiber_safe`)."""

    light = True

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Work):
            fibers.spawn(self._drive_fiber, f"run:{self.run.id}")
        elif isinstance(message, _Done):
            self.exit(message.reason)
        return None

    def _drive_fiber(self) -> None:
        done = _Done(self._drive())
        if not tell_inline(self, done):
            tell_if_alive(self.actor_ref, done)

    def on_stop(self) -> None:
        if not self.run.ended:
            self.run.token.cancel("the run's driver was stopped")


def trace_id_of(run: Run) -> str:
    """The trace id (hex) of the request that started `run`; "" outside a trace."""
    with telemetry.use(run.trace):
        ids = telemetry.current_ids()
    return "" if ids is None else ids[0]


def outcome_of(status: str) -> RunOutcome:
    """A feature's status as a run outcome: `done`, `done_with_result` and `completed`
    are `done`, `cancelled` is `cancelled`, anything else `failed`."""
    if status in ("done", "done_with_result", "completed"):
        return "done"
    if status == "cancelled":
        return "cancelled"
    return "failed"


__all__ = [
    "DEFAULT_RECENT_RUNS",
    "DEFAULT_RUN_EVENTS",
    "RUN_RETAIN_BYTES",
    "RUN_RETAIN_MESSAGES",
    "RUN_STREAM_SEND_TIMEOUT_S",
    "FiberDriver",
    "Run",
    "RunDriver",
    "RunEntry",
    "RunLog",
    "ServiceRuns",
    "Work",
    "note_detail",
    "outcome_of",
    "trace_id_of",
]
