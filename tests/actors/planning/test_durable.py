"""Durable planning runs in process: the journal's rules, replay and resume, the budgets
that carry over, the bounds (journal size, retention, retained runs, resume
concurrency) at their edges, and the uid an attach needs.

A "crash" here is a journal cut back to what a killed daemon would have left: every
record up to a step's `started` marker (the step in flight), or a torn last line.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.actors.runs.journal import (
    END_RESERVE_BYTES,
    MAX_JOURNAL_BYTES_RANGE,
    JournalLimits,
    RunJournals,
)
from phloem.protocols.errors import PhloemError
from phloem.protocols.result import PlanningResult
from phloem.supervision.refs import Owner
from tests.actors.planning.durable_adapters import value_of
from tests.helpers import raises_kind, wait_until

pytestmark = pytest.mark.timeout(120)

ADAPTERS = AdapterRegistry.load(
    {"d": "tests.actors.planning.durable_adapters:DurablePlanner"},
    {"d": "tests.actors.planning.durable_adapters:LoggingExecutor"},
)
DURABLE = {"durable": True}


@contextmanager
def runtime(root: Path, **limits: Any) -> Iterator[PlanningRuntime]:
    journals = RunJournals(root, "planning", JournalLimits(**limits))
    rt = PlanningRuntime(ADAPTERS, name=f"durable-{time.monotonic_ns()}", journals=journals)
    try:
        yield rt
    finally:
        rt.stop()


def executions(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [" ".join(line.split()[:2]) for line in log.read_text().splitlines()]


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def cut_at_started(path: Path, step_id: str) -> None:
    """Leave the journal as a daemon killed while `step_id` ran would: every record up to
    and including that step's `started` marker."""
    kept = []
    for line in path.read_text().splitlines():
        kept.append(line)
        record = json.loads(line)
        if record["type"] == "started" and record["info"].get("step_id") == step_id:
            break
    path.write_text("\n".join(kept) + "\n")


def finish(rt: PlanningRuntime, run_id: str, owner: Owner | None = None) -> PlanningResult:
    owner = owner or Owner.client("reattach")
    _run, ref = rt.attach(owner, run_id)
    return rt.await_result(owner, ref, 60)


def complete_run(rt: PlanningRuntime, goal: dict[str, Any], **options: Any) -> tuple[str, Any]:
    owner = Owner.client("starter")
    run = rt.start(owner, "d", "d", goal, {}, DURABLE | options)
    return run.durable_id, rt.await_result(owner, run, 60)


# --- the journal -------------------------------------------------------------------------


def test_a_durable_run_journals_every_callback_privately_with_secrets_pruned(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    goal = {"key": "k", "steps": 2, "log": str(log), "api_key": "sk-live-0123456789abcdef"}
    with runtime(tmp_path / "runs") as rt:
        run_id, result = complete_run(rt, goal)
        path = rt.journals.path(run_id) if rt.journals else Path()
    assert result.status == "completed" and result.result == value_of("k", 2)
    assert run_id.startswith("drun_") and len(run_id) == 37
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert "sk-live" not in text and "api_key" not in text
    kinds = [(r["type"], (r.get("info") or {}).get("call")) for r in records(path)]
    assert kinds == [
        ("begin", None),
        ("started", "plan"),
        ("completed", None),
        ("started", "execute"),
        ("completed", None),
        ("started", "review"),
        ("completed", None),
        ("started", "execute"),
        ("completed", None),
        ("started", "review"),
        ("completed", None),
        ("end", None),
    ]
    assert [r["seq"] for r in records(path)] == list(range(1, 13))


def test_a_run_that_is_not_durable_writes_no_journal(tmp_path: Path) -> None:
    with runtime(tmp_path / "runs") as rt:
        owner = Owner.client("t")
        run = rt.start(owner, "d", "d", {"key": 1, "steps": 1, "log": str(tmp_path / "l")})
        assert run.durable_id == ""
        assert rt.await_result(owner, run, 60).status == "completed"
        assert rt.journals is not None and rt.journals.ids() == []


# --- resume --------------------------------------------------------------------------------


def test_a_resumed_run_replays_what_completed_and_retries_an_idempotent_step(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    with runtime(tmp_path / "runs") as rt:
        run_id, uncrashed = complete_run(rt, {"key": "a", "steps": 5, "log": str(log)})
        assert rt.journals is not None
        cut_at_started(rt.journals.path(run_id), "s3")
    assert executions(log) == [f"a s{n}" for n in range(1, 6)]
    with runtime(tmp_path / "runs") as rt:
        assert rt.resume_all() == 1
        resumed = finish(rt, run_id)
    assert resumed.status == "completed" and resumed.result == uncrashed.result
    assert resumed.steps_executed == uncrashed.steps_executed == 5
    assert resumed.observations == uncrashed.observations
    # s1, s2 replayed (not run again); s3 was in flight: run again (idempotent); s4, s5 new
    assert executions(log)[5:] == ["a s3", "a s4", "a s5"]


def test_a_non_idempotent_step_in_flight_ends_the_run_interrupted_never_rerun(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    goal = {"key": "b", "steps": 5, "log": str(log), "non_idempotent": [3]}
    with runtime(tmp_path / "runs") as rt:
        run_id, _ = complete_run(rt, goal)
        assert rt.journals is not None
        cut_at_started(rt.journals.path(run_id), "s3")
    with runtime(tmp_path / "runs") as rt:
        rt.resume_all()
        result = finish(rt, run_id)
    assert result.status == "failed" and result.error is not None
    assert result.error.kind == "interrupted"
    assert result.error.reason == {"step_id": "s3", "plan_id": "p-b"}
    assert executions(log)[5:] == []  # nothing ran again


def test_a_torn_last_line_is_repaired_and_the_run_resumes(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with runtime(tmp_path / "runs") as rt:
        run_id, uncrashed = complete_run(rt, {"key": "t", "steps": 3, "log": str(log)})
        assert rt.journals is not None
        path = rt.journals.path(run_id)
        cut_at_started(path, "s2")
        with path.open("ab") as handle:
            handle.write(b'{"seq": 99, "type": "torn')  # an append cut short
    with runtime(tmp_path / "runs") as rt:
        assert rt.resume_all() == 1
        assert finish(rt, run_id).result == uncrashed.result
    assert b'"torn' not in path.read_bytes()


def test_a_corrupt_middle_line_is_refused_typed_and_left_alone(tmp_path: Path) -> None:
    with runtime(tmp_path / "runs") as rt:
        run_id, _ = complete_run(rt, {"key": "c", "steps": 2, "log": str(tmp_path / "l")})
        assert rt.journals is not None
        path = rt.journals.path(run_id)
        cut_at_started(path, "s2")
        lines = path.read_text().splitlines()
        lines[2] = "{not json"
        path.write_text("\n".join(lines) + "\n")
        before = path.read_bytes()
    with runtime(tmp_path / "runs") as rt:
        assert rt.resume_all() == 0  # never resumed
        assert rt.journals is not None
        assert raises_kind(rt.journals.open, run_id) == "run_journal_corrupt"
        assert raises_kind(rt.attach, Owner.client("x"), run_id) == "run_journal_corrupt"
    assert path.read_bytes() == before


def test_the_deadline_counts_from_the_original_start(tmp_path: Path) -> None:
    with runtime(tmp_path / "runs") as rt:
        run_id, _ = complete_run(
            rt, {"key": "d", "steps": 3, "log": str(tmp_path / "l")}, timeout_ms=60_000
        )
        assert rt.journals is not None
        path = rt.journals.path(run_id)
        cut_at_started(path, "s2")
        lines = path.read_text().splitlines()
        begin = json.loads(lines[0])
        begin["started_at"] -= 61.0  # the daemon was down for longer than the deadline
        lines[0] = json.dumps(begin)
        path.write_text("\n".join(lines) + "\n")
    with runtime(tmp_path / "runs") as rt:
        rt.resume_all()
        result = finish(rt, run_id)
    assert result.error is not None and result.error.kind == "deadline_exceeded"


def test_max_steps_counts_the_replayed_steps(tmp_path: Path) -> None:
    goal = {"key": "m", "steps": 5, "log": str(tmp_path / "l")}
    with runtime(tmp_path / "runs") as rt:
        run_id, uncrashed = complete_run(rt, goal, max_steps=3)
        assert uncrashed.error is not None and uncrashed.error.kind == "max_steps_exceeded"
        assert rt.journals is not None
        cut_at_started(rt.journals.path(run_id), "s3")
    with runtime(tmp_path / "runs") as rt:
        rt.resume_all()
        resumed = finish(rt, run_id)
    assert resumed.error is not None and resumed.error.kind == "max_steps_exceeded"
    assert resumed.steps_executed == uncrashed.steps_executed == 3


def test_a_stopping_runtime_suspends_a_durable_run_for_the_next_one(tmp_path: Path) -> None:
    log = tmp_path / "log"
    goal = {"key": "s", "steps": 2, "log": str(log), "slow": 1, "slow_s": 30}
    with runtime(tmp_path / "runs") as rt:
        owner = Owner.client("t")
        run = rt.start(owner, "d", "d", goal, {}, DURABLE | {"callback_timeout_ms": 60_000})
        wait_until(lambda: executions(log) == ["s s1"], 30, "s1 started")
        run_id = run.durable_id
    with runtime(tmp_path / "runs") as rt:
        assert rt.journals is not None
        journal = rt.journals.open(run_id)
        assert journal.end is None and journal.in_flight == [2]
        assert [i.outcome for i in rt.durable_runs(Owner.client("me"))] == [None]


# --- ownership -------------------------------------------------------------------------------


def test_attach_needs_the_starters_uid(tmp_path: Path) -> None:
    with runtime(tmp_path / "runs") as rt:
        run_id, _ = complete_run(rt, {"key": "u", "steps": 1, "log": str(tmp_path / "l")})
        other = Owner.client("other", uid=os.getuid() + 1)
        assert raises_kind(rt.attach, other, run_id) == "not_planning_owner"
        assert rt.durable_runs(other) == []
        assert raises_kind(rt.attach, Owner.client("x"), "drun_" + "0" * 32) == (
            "unknown_durable_run"
        )
        assert raises_kind(rt.attach, Owner.client("x"), "../etc/passwd") == ("unknown_durable_run")
        assert finish(rt, run_id).status == "completed"


def test_a_durable_run_outlives_its_owner(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with runtime(tmp_path / "runs") as rt:
        owner = Owner.client("gone")
        run = rt.start(owner, "d", "d", {"key": "o", "steps": 3, "log": str(log)}, {}, DURABLE)
        rt.owner_down(owner)
        assert finish(rt, run.durable_id).result == value_of("o", 3)


# --- bounds ------------------------------------------------------------------------------------


def test_the_journal_size_limit_at_its_edge(tmp_path: Path) -> None:
    low, high = MAX_JOURNAL_BYTES_RANGE
    assert raises_kind(JournalLimits, max_journal_bytes=low - 1) == "invalid_argument"
    assert raises_kind(JournalLimits, max_journal_bytes=high + 1) == "invalid_argument"
    journals = RunJournals(tmp_path, "planning", JournalLimits(max_journal_bytes=low))
    journal = journals.create(os.getuid(), "edge", {})
    room = low - END_RESERVE_BYTES - journal.size
    overhead = len(b'{"n":2,"outcome":"","seq":2,"type":"completed"}\n')
    journal.step_completed(2, "x" * (room - overhead))  # exactly to the limit
    assert journal.size == low - END_RESERVE_BYTES
    with pytest.raises(PhloemError) as info:
        journal.step_completed(3, "")  # one record more
    assert info.value.kind == "run_journal_full"
    journal.finish("done", "y" * END_RESERVE_BYTES)  # does not fit: a failed end does
    assert journal.end is not None and journal.end["outcome"] == "failed"
    assert journals.open(journal.id).end == {**journal.end, "seq": 3}


def test_retention_and_retained_runs_at_their_edges(tmp_path: Path) -> None:
    journals = RunJournals(tmp_path, "planning", JournalLimits(retention_s=100.0, max_retained=2))
    ended = []
    for _ in range(3):
        journal = journals.create(os.getuid(), "r", {})
        journal.finish("done", None)
        journals.note_ended(journal)
        ended.append(journal)
    at = [float(j.end["at"]) for j in ended if j.end]
    assert journals.prune(now=at[0]) == [ended[0].id]  # 3 ended, 2 kept: the oldest goes
    assert journals.prune(now=at[1]) == []  # exactly max_retained
    assert journals.prune(now=at[1] + 100.0 - 1e-3) == []  # just inside retention_s
    assert journals.prune(now=at[1] + 100.0) == [ended[1].id]  # at retention_s it goes
    assert journals.ids() == [ended[2].id]


@pytest.mark.parametrize("concurrency", [4, 5])
def test_resume_concurrency_at_its_edge(tmp_path: Path, concurrency: int) -> None:
    log = tmp_path / "log"
    journals = RunJournals(tmp_path / "runs", "planning", JournalLimits())
    for key in range(5):
        goal = {"key": key, "steps": 1, "log": str(log), "slow": 1, "slow_s": 1.0}
        request = {"planner": "d", "executor": "d", "goal": goal, "context": {}}
        journals.create(os.getuid(), "waiting", request | {"options": DURABLE})
    with runtime(tmp_path / "runs", resume_concurrency=concurrency) as rt:
        assert rt.resume_all() == 5
        assert len(rt.runs.live()) == concurrency  # exactly the limit resumes at once
        assert rt.resume_pending == 5 - concurrency  # one over it waits
        wait_until(lambda: rt.resume_pending == 0 and not rt.runs.live(), 60, "all resumed")
        infos = rt.durable_runs(Owner.client("me"))
    assert sorted(executions(log)) == [f"{k} s1" for k in range(5)]
    assert [i.outcome for i in infos] == ["done"] * 5
