"""Durable runs: one append-only journal per run, so that a run outlives its daemon.

A run started with `durable = true` gets a durable id (`drun_` + 32 hex digits) and a
journal `<dir>/<kind>/<id>.jsonl`: one JSON object a line, numbered by `seq` from 1::

    {"seq": 1, "type": "begin", "id", "kind", "uid", "name", "started_at", "input"}
    {"seq": N, "type": "started", "n", "info"}       a step is about to run (its marker)
    {"seq": N, "type": "completed", "n", "outcome"}  the step's outcome, as it came back
    {"seq": N, "type": "end", "at", "outcome", "result"}

Step `n` is the feature's own count of the steps it takes (a planning run's callbacks,
an agent run's model calls and tool calls), so a resumed run asks the journal, step by
step, "did this one complete?" and replays the recorded outcome instead of doing it
again. A `started` marker without its `completed` is the step that was in flight when
the daemon died: the feature retries it when it is idempotent and otherwise ends the run
`interrupted` (it is never silently run twice).

The durability rules are the session store's, with its code (`phloem.base.durablefiles`):
each record is synced (`fdatasync`) before `append` returns, so before the step it
records is acknowledged; a torn last line is cut back when the journal is opened
(warning `run_journal_tail_repaired`); a corrupt complete line is `run_journal_corrupt`
and the file is left as it is; files are 0600 in 0700 directories; every value is
secret-pruned (`prune_secrets`) before it is written. JSONL rather than sqlite3: the same
format, writer and repair rules as the session transcripts, one `fdatasync` per step, and
a file a user can read with any tool.

Bounds (`JournalLimits`, each a named range): a journal holds at most
`max_journal_bytes` (`run_journal_full` beyond it; the last `END_RESERVE_BYTES` are kept
for the end record, so a run that fills its journal still ends, failed); an ended run's
journal is kept `retention_s` seconds for its owner to reattach and read the result, and
at most `max_retained` ended journals are kept (the oldest go first);
`resume_concurrency` bounds how many unfinished runs a starting daemon resumes at once.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from phloem.base.durablefiles import (
    AppendFile,
    FileKinds,
    corrupt,
    io_error,
    private_dir,
    read_jsonl,
    remove,
)
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.runs import DurableRunInfo
from phloem.protocols.secrets import prune_secrets
from phloem.protocols.warnings import RunWarning

log = get_logger("phloem.runs")

RUN_JOURNAL_FILES = FileKinds(
    ErrorKind.RUN_JOURNAL_IO, ErrorKind.RUN_JOURNAL_CORRUPT, "run_journal_tail_repaired"
)
DURABLE_ID_PREFIX = "drun_"
DURABLE_ID = re.compile(r"^drun_[0-9a-f]{32}$")

DEFAULT_MAX_JOURNAL_BYTES = 16 * 1024 * 1024
"""Bytes one durable run's journal holds at most (`[planning] max_journal_bytes`)."""
MAX_JOURNAL_BYTES_RANGE = (64 * 1024, 1024 * 1024 * 1024)
"""The values `max_journal_bytes` may take."""
END_RESERVE_BYTES = 16 * 1024
"""Bytes of every journal kept for its end record (a failed end when the result is big)."""
DEFAULT_RETENTION_S = 24 * 3600.0
"""Seconds an ended durable run's journal is kept for its owner (`retention_s`)."""
RETENTION_RANGE = (0.0, 365 * 24 * 3600.0)
"""The values `retention_s` may take."""
DEFAULT_MAX_RETAINED = 1000
"""Ended durable runs kept at most; the oldest go first (`max_retained_runs`)."""
MAX_RETAINED_RANGE = (1, 1_000_000)
"""The values `max_retained_runs` may take."""
DEFAULT_RESUME_CONCURRENCY = 16
"""Unfinished durable runs a starting daemon resumes at once (`resume_concurrency`)."""
RESUME_CONCURRENCY_RANGE = (1, 10_000)
"""The values `resume_concurrency` may take."""

_encoder = msgspec.json.Encoder(order="sorted")

_claims_lock = threading.Lock()
_claimed: set[Path] = set()  # journals a live driver of this process writes


def claim(path: Path) -> bool:
    """Take the journal at `path` for one driver of this process (False: another live
    driver has it — a service restarted beside its still running runs — and it must not
    be resumed twice)."""
    with _claims_lock:
        if path in _claimed:
            return False
        _claimed.add(path)
        return True


def check_owner(uid: int, journal: RunJournal) -> None:
    """Only the uid that started a durable run may attach to it (the uid of the
    connection's peer credentials): another is `not_planning_owner`, for every kind."""
    if uid != journal.uid:
        raise PhloemError(ErrorKind.NOT_PLANNING_OWNER, "the durable run belongs to another user")


def release(path: Path) -> None:
    """The driver of the journal at `path` is gone."""
    with _claims_lock:
        _claimed.discard(path)


@dataclass(frozen=True)
class JournalLimits:
    """The bounds of one kind's journals (checked: each out of range is `invalid_argument`)."""

    max_journal_bytes: int = DEFAULT_MAX_JOURNAL_BYTES
    retention_s: float = DEFAULT_RETENTION_S
    max_retained: int = DEFAULT_MAX_RETAINED
    resume_concurrency: int = DEFAULT_RESUME_CONCURRENCY
    sync: bool = True

    def __post_init__(self) -> None:
        check_range("max_journal_bytes", self.max_journal_bytes, *MAX_JOURNAL_BYTES_RANGE)
        check_range("retention_s", self.retention_s, *RETENTION_RANGE, integer=False)
        check_range("max_retained", self.max_retained, *MAX_RETAINED_RANGE)
        check_range("resume_concurrency", self.resume_concurrency, *RESUME_CONCURRENCY_RANGE)


@dataclass(eq=False)
class RunJournal:
    """One run's journal: what it recorded (read back when opened) and its append file."""

    id: str
    path: Path
    limits: JournalLimits
    begin: dict[str, Any]
    started: dict[int, Any] = field(default_factory=dict)  # n -> info of its marker
    completed: dict[int, Any] = field(default_factory=dict)  # n -> its outcome
    end: dict[str, Any] | None = None
    seq: int = 0
    size: int = 0
    warnings: list[RunWarning] = field(default_factory=list)
    _file: AppendFile | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def uid(self) -> int:
        return int(self.begin.get("uid", -1))

    @property
    def input(self) -> Any:
        return self.begin.get("input")

    @property
    def started_at(self) -> float:
        return float(self.begin.get("started_at", 0.0))

    @property
    def in_flight(self) -> list[int]:
        """The steps whose marker has no outcome (the ones a crash cut short)."""
        return sorted(n for n in self.started if n not in self.completed)

    def info(self, live: bool = False) -> DurableRunInfo:
        end = self.end or {}
        return DurableRunInfo(
            id=self.id,
            kind=str(self.begin.get("kind", "")),
            name=str(self.begin.get("name", "")),
            uid=self.uid,
            started_at=self.started_at,
            ended_at=end.get("at"),
            outcome=end.get("outcome"),
            steps=len(self.completed),
            bytes=self.size,
            live=live,
        )

    # -- writing -------------------------------------------------------------------------

    def step_started(self, n: int, info: Any) -> None:
        """Record that step `n` is about to run (synced before it runs)."""
        self._append({"type": "started", "n": n, "info": info})
        self.started[n] = info

    def step_completed(self, n: int, outcome: Any) -> None:
        """Record step `n`'s outcome (synced before the feature acts on it)."""
        pruned = prune_secrets(outcome)
        self._append({"type": "completed", "n": n, "outcome": pruned})
        self.completed[n] = pruned

    def finish(self, outcome: str, result: Any) -> None:
        """Record the run's end; a result that does not fit is replaced by a failed end
        (`run_journal_full`) in the room kept for it. Closes the file."""
        if self.end is not None:
            return
        data = msgspec.to_builtins(result)
        record = {"type": "end", "at": time.time(), "outcome": outcome, "result": data}
        try:
            self._append(record, reserve=False)
        except PhloemError as exc:
            if exc.kind != ErrorKind.RUN_JOURNAL_FULL:
                raise
            record = {**record, "outcome": "failed", "result": None, "error": exc.kind}
            self._append(record, reserve=False)
        self.end = record
        self.close()

    def _append(self, record: dict[str, Any], *, reserve: bool = True) -> None:
        with self._lock:
            line = _encoder.encode({"seq": self.seq + 1, **prune_secrets(record)}) + b"\n"
            room = self.limits.max_journal_bytes - (END_RESERVE_BYTES if reserve else 0)
            if self.size + len(line) > room:
                raise PhloemError(
                    ErrorKind.RUN_JOURNAL_FULL,
                    f"durable run {self.id}: {self.size + len(line)} bytes would pass the "
                    f"journal's limit of {room} (max_journal_bytes)",
                    {"limit": self.limits.max_journal_bytes},
                )
            if self._file is None:
                try:
                    self._file = AppendFile(self.path, self.limits.sync)
                except OSError as exc:
                    raise io_error(f"cannot open {self.path}", exc, RUN_JOURNAL_FILES) from None
            try:
                self._file.append(line)
            except OSError as exc:
                raise io_error(f"cannot append to {self.path}", exc, RUN_JOURNAL_FILES) from None
            self.seq += 1
            self.size += len(line)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def planning_journals(cfg: Any, kind: str) -> RunJournals | None:
    """The journals of `kind` (`planning`, `agent`) under `[planning] journal_dir`, with
    its bounds; None without a `[planning]` section (`cfg` is its settings)."""
    if cfg is None or not hasattr(cfg, "journals_dir"):
        return None
    limits = JournalLimits(
        max_journal_bytes=cfg.max_journal_bytes,
        retention_s=cfg.retention_s,
        max_retained=cfg.max_retained_runs,
        resume_concurrency=cfg.resume_concurrency,
        sync=cfg.fsync,
    )
    return RunJournals(cfg.journals_dir(), kind, limits)


class RunJournals:
    """The journals of one kind of run under `root/<kind>` (thread-safe)."""

    def __init__(self, root: str | os.PathLike[str], kind: str, limits: JournalLimits) -> None:
        self.kind = kind
        self.limits = limits
        self.dir = Path(root) / kind
        self._lock = threading.Lock()
        self._ended: dict[str, float] = {}  # ended journals kept: id -> when it ended
        self._made = False  # the directory is made by the first durable run, not before

    def _make_dir(self) -> None:
        """The journals' directory (0700), made when the first journal is: a daemon that
        never starts a durable run leaves nothing in the state directory."""
        if self._made:
            return
        try:
            private_dir(self.dir, self.limits.sync)
        except OSError as exc:
            raise io_error(f"cannot create {self.dir}", exc, RUN_JOURNAL_FILES) from None
        self._made = True

    def path(self, run_id: str) -> Path:
        return self.dir / f"{run_id}.jsonl"

    def create(self, uid: int, name: str, input: Any) -> RunJournal:
        """A new journal with its begin record written (and synced)."""
        self._make_dir()
        run_id = DURABLE_ID_PREFIX + secrets.token_hex(16)
        begin = {
            "type": "begin",
            "id": run_id,
            "kind": self.kind,
            "uid": uid,
            "name": name,
            "started_at": time.time(),
            "input": input,
        }
        journal = RunJournal(run_id, self.path(run_id), self.limits, begin={})
        journal._append(begin)
        journal.begin = prune_secrets(begin)
        return journal

    def open(self, run_id: str) -> RunJournal:
        """Read a journal back (`unknown_durable_run` when there is none of that id)."""
        if not DURABLE_ID.match(run_id):
            raise PhloemError(ErrorKind.UNKNOWN_DURABLE_RUN, "not a durable run id")
        path = self.path(run_id)
        if not path.exists():
            raise PhloemError(ErrorKind.UNKNOWN_DURABLE_RUN, f"no durable run {run_id}")
        lines = read_jsonl(path, repair=True, sync=self.limits.sync, kinds=RUN_JOURNAL_FILES)
        journal = RunJournal(run_id, path, self.limits, begin={})
        if lines.repaired is not None:
            journal.warnings.append(lines.repaired)
            log.warning("run_journal_tail_repaired", run=run_id, path=str(path))
        for number, record in lines.records:
            if record.get("seq") != journal.seq + 1:
                raise corrupt(path, number, f"expected seq {journal.seq + 1}", RUN_JOURNAL_FILES)
            journal.seq += 1
            kind, n = record.get("type"), record.get("n")
            if number == 1:
                if kind != "begin" or record.get("id") != run_id:
                    raise corrupt(path, number, "no begin record", RUN_JOURNAL_FILES)
                journal.begin = record
            elif kind == "started" and isinstance(n, int):
                journal.started[n] = record.get("info")
            elif kind == "completed" and isinstance(n, int):
                journal.completed[n] = record.get("outcome")
            elif kind == "end" and journal.end is None:
                journal.end = record
            else:
                raise corrupt(path, number, f"unexpected record {kind!r}", RUN_JOURNAL_FILES)
        if not journal.begin:
            raise corrupt(path, 1, "empty journal", RUN_JOURNAL_FILES)
        journal.size = path.stat().st_size
        return journal

    def ids(self) -> list[str]:
        """The ids of every journal kept, oldest file first."""
        if not self.dir.is_dir():
            return []  # no durable run was ever started here
        try:
            entries = [(p.stat().st_mtime, p.stem) for p in self.dir.glob("drun_*.jsonl")]
        except OSError as exc:
            raise io_error(f"cannot list {self.dir}", exc, RUN_JOURNAL_FILES) from None
        return [name for _, name in sorted(entries) if DURABLE_ID.match(name)]

    def infos(self, uid: int, live: Callable[[str], Any]) -> list[DurableRunInfo]:
        """The runs kept here that belong to `uid`, oldest first; `live(run_id)` is the
        running `Run` of that id, if any (its journal is the one in use)."""
        found = []
        for run_id in self.ids():
            running = live(run_id)
            try:
                journal = running.journal if running is not None else self.open(run_id)
            except PhloemError:
                continue
            if journal is not None and journal.uid == uid:
                found.append(journal.info(live=running is not None and not running.ended))
        return found

    def scan(self) -> tuple[list[RunJournal], list[RunJournal]]:
        """Every journal read back, as (unfinished, ended); a journal that cannot be read
        is logged and left alone (never resumed, never removed)."""
        unfinished: list[RunJournal] = []
        ended: list[RunJournal] = []
        for run_id in self.ids():
            try:
                journal = self.open(run_id)
            except PhloemError as exc:
                log.error("run_journal_unreadable", run=run_id, kind=exc.kind, error=str(exc))
                continue
            if journal.end is None:
                unfinished.append(journal)
            else:
                ended.append(journal)
                self.note_ended(journal)
        return unfinished, ended

    def note_ended(self, journal: RunJournal) -> None:
        """`journal` has its end record: count it among the retained ones."""
        with self._lock:
            self._ended[journal.id] = float((journal.end or {}).get("at", time.time()))

    def prune(self, now: float | None = None) -> list[str]:
        """Remove ended journals past `retention_s`, then the oldest beyond `max_retained`
        (of those `scan` found and `note_ended` was told of); the ids that went."""
        now = time.time() if now is None else now
        with self._lock:
            ordered = sorted(self._ended.items(), key=lambda item: item[1])
            expired = [i for i, at in ordered if at + self.limits.retention_s <= now]
            keep = [i for i, _ in ordered if i not in set(expired)]
            gone = expired + keep[: max(0, len(keep) - self.limits.max_retained)]
            for run_id in gone:
                del self._ended[run_id]
        for run_id in gone:
            remove(self.path(run_id), self.limits.sync)
        return gone

    @property
    def retained(self) -> int:
        with self._lock:
            return len(self._ended)

    def forget(self, run_id: str) -> bool:
        return remove(self.path(run_id), self.limits.sync)


__all__ = [
    "DEFAULT_MAX_JOURNAL_BYTES",
    "DEFAULT_MAX_RETAINED",
    "DEFAULT_RESUME_CONCURRENCY",
    "DEFAULT_RETENTION_S",
    "DURABLE_ID_PREFIX",
    "END_RESERVE_BYTES",
    "DurableRunInfo",
    "JournalLimits",
    "RunJournal",
    "RunJournals",
    "check_owner",
    "claim",
    "release",
]
