"""The one run lifecycle (`phloem.actors.runs`) in a real embedded tree: a run starts at
once and its early events wait for the owner (the buffer's edge: exactly full, one
over), the tree's record keeps every run — a 5 ms one too — with its events and outcome,
content-free and within its limits, and a stream that grants no credit cancels its run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

import phloem
from phloem.actors import runs as lifecycle
from phloem.actors.agents.protocol import AgentStreamItem
from phloem.actors.runs import RunDriver, RunLog, ServiceRuns, note_detail
from phloem.actors.streams import StreamHub
from phloem.config import parse_config
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.protocols.refs import RefKind
from phloem.protocols.runs import (
    MAX_NOTE_DETAILS,
    MAX_NOTE_TEXT_CHARS,
    RunBegan,
    RunEnd,
    RunEvent,
    RunFinished,
    RunForgotten,
    RunItem,
    RunMissed,
    RunNote,
    RunNoted,
    RunUpdate,
)
from phloem.supervision import Supervisor, SupervisorSpec
from phloem.supervision.refs import Owner, OwnerRegistry
from tests.helpers import raises_kind, wait_until

pytestmark = pytest.mark.timeout(60)

CONFIG = """
[services]
disabled = ["echo"]

[agents.functions.quick]
fn = "tests.actors.runs_fixtures:quick"
input_keys = ["topic"]
output_key = "answer"

[agents.functions.leaky]
fn = "tests.actors.runs_fixtures:leaky"
input_keys = ["topic"]
output_key = "said"

[agents.planners.pair]
planner = "sequential"
sub_agents = ["quick", "leaky"]
"""


class Ends:
    """The runs of a record that finished, waited for on the record itself (no polling)."""

    def __init__(self, log: RunLog | None) -> None:
        assert log is not None
        self.finished: dict[str, RunFinished] = {}
        self.updates: list[RunUpdate] = []
        self._cond = threading.Condition()
        log.follow(self._take)

    def _take(self, update: RunUpdate) -> bool:
        with self._cond:
            self.updates.append(update)
            if isinstance(update, RunFinished):
                self.finished[update.id] = update
                self._cond.notify_all()
        return True

    def wait(self, count: int, timeout: float = 30.0) -> list[RunFinished]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.finished) >= count, timeout), count
            return list(self.finished.values())


@pytest.fixture
def tree() -> Iterator[phloem.Tree]:
    with phloem.Tree.start(parse_config(CONFIG), name="runs-test") as t:
        yield t


def test_a_run_starts_at_once_and_its_events_wait_for_its_owner(tree: phloem.Tree) -> None:
    ends = Ends(tree.resources.runs)
    with tree.client("owner") as client:
        started = client.start_agent_run("pair", state={"topic": "tea"})
        [end] = ends.wait(1)  # it ran to its end with nobody subscribed
        assert end.outcome == "done"
        run = client.follow_agent_run(started)  # and still nothing was missed
    assert run.ok and run.state["answer"] == "quick(3)"
    assert [e.author for e in run.events if e.actions.state_delta] == ["quick", "leaky"]
    assert not [w for w in run.warnings if w.code == "events_missed"]


def _items(client: Any, stream: str) -> list[Any]:
    items = []
    for item in client.subscribe(stream, CreditWindow(64, 1 << 22), event_type=AgentStreamItem):
        items.append(item)
    return items


def test_the_early_events_buffer_holds_exactly_its_limit_and_counts_what_overflows(
    tree: phloem.Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    ends = Ends(tree.resources.runs)
    with tree.client("owner") as client:
        first = client.start_agent_run("pair", state={"topic": "x"})
        ends.wait(1)
        whole = _items(client, first.stream)
        assert isinstance(whole[-1], RunEnd) and not any(isinstance(i, RunMissed) for i in whole)
        size = len(whole)  # every event and the end: what one run of `pair` sends

        monkeypatch.setattr(lifecycle, "RUN_RETAIN_MESSAGES", size)  # exactly enough
        exact = client.start_agent_run("pair", state={"topic": "x"})
        ends.wait(2)
        kept = _items(client, exact.stream)
        assert [type(i) for i in kept] == [type(i) for i in whole]

        monkeypatch.setattr(lifecycle, "RUN_RETAIN_MESSAGES", size - 2)  # two too few
        over = client.start_agent_run("pair", state={"topic": "x"})
        ends.wait(3)
        short = _items(client, over.stream)
        assert short[0] == RunMissed(2)  # told first, then the newest ones, the end last
        assert [i.seq for i in short[1:]] == [i.seq for i in whole[2:]]
        assert isinstance(short[-1], RunEnd)

        again = client.start_agent_run("pair", state={"topic": "x"})
        ends.wait(4)
        run = client.follow_agent_run(again)
    [warning] = [w for w in run.warnings if w.code == "events_missed"]
    assert warning.message.startswith("2 early events")
    assert len(run.events) == sum(isinstance(i, RunEvent) for i in whole) - 2


def test_the_record_keeps_a_five_ms_run_with_its_events_and_outcome(tree: phloem.Tree) -> None:
    ends = Ends(tree.resources.runs)
    with tree.client("recorder") as client:
        run = client.run_agent("quick", state={"topic": "lemonade"})
        assert run.ok
        [end] = ends.wait(1)
        [summary] = client.list_runs()
    assert summary.id == end.id and summary.kind == "agent" and summary.name == "quick"
    assert summary.outcome == "done" and summary.error is None
    assert summary.owner == "client recorder"
    assert summary.ended_at is not None and summary.ended_at >= summary.started_at
    assert summary.event_count == len(summary.events) == len(run.events) >= 1
    note = summary.events[0]
    assert note.kind == "agent_event" and note.detail["author"] == "quick"
    assert note.detail["writes"] == 1  # a count of the state it wrote, never the values
    began = [u for u in ends.updates if isinstance(u, RunBegan)]
    noted = [u for u in ends.updates if isinstance(u, RunNoted)]
    assert [u.run.id for u in began] == [summary.id] and len(noted) == summary.event_count


def test_the_record_holds_no_content(tree: phloem.Tree) -> None:
    ends = Ends(tree.resources.runs)
    with tree.client("careful") as client:
        run = client.run_agent("pair", input="a private prompt", state={"topic": "confidential"})
        ends.wait(1)
        record = msgspec.json.encode(client.list_runs()).decode()
    assert run.ok and "sk-live" in run.state["said"]  # the owner's own result has it
    for text in ("confidential", "private prompt", "quick(12)", "the answer", "sk-live"):
        assert text not in record, text
    assert '"author":"leaky"' in record and '"writes":1' in record


def test_the_tree_record_takes_its_limits_from_the_config() -> None:
    config = parse_config(CONFIG + "\n[supervision]\nrecent_runs = 2\nrecent_run_events = 1\n")
    with phloem.Tree.start(config, name="runs-limits") as tree, tree.client() as client:
        ends = Ends(tree.resources.runs)
        for i in range(3):
            assert client.run_agent("pair", state={"topic": f"t{i}"}).ok
        ended = ends.wait(3)
        listed = client.list_runs()
    assert [r.id for r in listed] == [e.id for e in ended[1:]]  # the oldest one went
    assert all(len(r.events) == 1 and r.events_dropped == r.event_count - 1 for r in listed)
    assert any(isinstance(u, RunForgotten) and u.id == ended[0].id for u in ends.updates)


def test_a_stream_that_grants_no_credit_cancels_its_run(
    tree: phloem.Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "RUN_STREAM_SEND_TIMEOUT_S", 0.05)
    ends = Ends(tree.resources.runs)
    with tree.client("stalled") as client:
        owner = client.transport.owner  # type: ignore[attr-defined]
        started = client.start_agent_run("pair", state={"topic": "x"})
        topic = tree.streams.get(started.stream, owner)
        got: list[bytes] = []
        topic.stream.subscribe(CreditWindow(1, 1 << 20), got.append, max_pending_messages=0)
        [end] = ends.wait(1)  # never acked: the first send beyond one item times out
    assert end.outcome == "cancelled"
    assert len(got) == 1


# --- the pieces alone ----------------------------------------------------------------------

KIND = RefKind("probe_run", prefix="probe_")


@pytest.fixture
def parts() -> Iterator[tuple[ServiceRuns, Any, RunLog]]:
    sup = Supervisor.start(SupervisorSpec(intensity=0), [], name="probe.runs")
    record = RunLog(max_runs=10, max_events=10)
    runs = ServiceRuns(
        "probe",
        KIND,
        refs=OwnerRegistry(),
        streams=StreamHub(),
        log=record,
        prefix="probe",
        max_live=1,
    )
    try:
        yield runs, sup, record
    finally:
        sup.stop(timeout=10)


def _launch(sup: Any, work: Any) -> Any:
    from phloem.supervision.spec import ChildSpec

    def launch(run: Any) -> Any:
        return sup.start_child(
            ChildSpec(f"run-{run.id}", (RunDriver, (run, work), {}), restart="temporary")
        )

    return launch


def test_a_driver_whose_work_fails_ends_its_run_run_crashed(
    parts: tuple[ServiceRuns, Any, RunLog],
) -> None:
    runs, sup, record = parts
    ends = Ends(record)
    owner = Owner.client("probe")

    def work(run: Any) -> None:
        run.emit("step", {"n": 1}, {"n": 1})
        raise RuntimeError("bug with api_key=sk-live-0123456789abcdefghij")

    run = runs.start(owner, "crashy", _launch(sup, work))
    [end] = ends.wait(1)
    assert end.outcome == "failed" and end.error == "run_crashed"
    items = list(runs.streams.get(run.stream, owner).stream.receiver())
    *_, last = [msgspec.msgpack.decode(i, type=RunItem) for i in items]
    assert last.error.kind == "run_crashed" and "sk-live" not in last.error.message
    assert runs.live() == []


def test_the_live_limit_is_backpressure_until_a_run_ends(
    parts: tuple[ServiceRuns, Any, RunLog],
) -> None:
    runs, sup, record = parts
    ends = Ends(record)
    owner = Owner.client("probe")
    release = threading.Event()

    def work(run: Any) -> None:
        release.wait(30)
        run.end("done", result=1)

    first = runs.start(owner, "holding", _launch(sup, work))
    with pytest.raises(PhloemError) as info:
        runs.start(owner, "one more", _launch(sup, work))
    assert info.value.kind == "backpressure"
    assert [r.name for r in record.runs()] == ["holding"]  # a refused start leaves nothing
    other = Owner.client("other")
    with pytest.raises(PhloemError) as bad:
        runs.resolve(first.ref, other)
    assert bad.value.kind == "not_owner"
    with pytest.raises(PhloemError) as bad:
        runs.resolve("probe_nothex", owner)
    assert bad.value.kind == "invalid_ref"
    assert runs.live_count() == 1 == len(runs.live())
    release.set()
    ends.wait(1)
    assert runs.live_count() == 0
    second = runs.start(owner, "next", _launch(sup, work))
    assert second.ref != first.ref


def test_the_record_keeps_its_limits_at_their_edges() -> None:
    record = RunLog(max_runs=2, max_events=3)
    owner = Owner.client("edge")
    a, b = record.begin("agent", "a", owner), record.begin("agent", "b", owner)
    assert [r.name for r in record.runs()] == ["a", "b"]  # exactly full
    for seq in range(1, 4):
        record.note(b, RunNote(seq, 0.0, "e"))
    [_, full] = record.runs()
    assert len(full.events) == 3 and full.events_dropped == 0  # exactly full
    record.note(b, RunNote(4, 0.0, "e"))
    [_, over] = record.runs()
    assert [n.seq for n in over.events] == [2, 3, 4] and over.events_dropped == 1
    assert over.event_count == 4
    record.finish(b, "done", None, 1.0)
    record.begin("agent", "c", owner)  # one over: the ended run goes first, not the older a
    assert [r.name for r in record.runs()] == ["a", "c"] and record.forgotten == 1
    record.begin("agent", "d", owner)  # every kept run still runs: the oldest goes
    assert [r.name for r in record.runs()] == ["c", "d"]
    record.note(a, RunNote(1, 0.0, "late"))  # a forgotten run's notes go nowhere
    assert all(r.name != "a" for r in record.runs())
    for bad in ({"max_runs": 0}, {"max_runs": 100_001}, {"max_events": 0}):
        with pytest.raises(ValueError):
            RunLog(**bad)
    RunLog(max_runs=100_000, max_events=10_000)


def test_a_note_keeps_only_short_scalar_details_without_secrets() -> None:
    detail = {f"k{i}": i for i in range(MAX_NOTE_DETAILS + 2)}
    assert list(note_detail(detail)) == [f"k{i}" for i in range(MAX_NOTE_DETAILS)]
    kept = note_detail(
        {
            "step_id": "s" * 500,
            "password": "hunter2",
            "args": {"path": "/etc/passwd"},
            "error": "bad api_key=sk-live-0123456789abcdefghij",
            "ok": True,
            "n": 3,
        }
    )
    assert set(kept) == {"step_id", "error", "ok", "n"}
    assert len(str(kept["step_id"])) <= MAX_NOTE_TEXT_CHARS + 1  # the cut's ellipsis
    assert "sk-live" not in str(kept["error"]) and kept["ok"] is True and kept["n"] == 3


def test_a_cancel_that_crosses_its_runs_end_is_no_error_to_its_owner(
    tree: phloem.Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "MAX_ENDED_REFS", 2)
    ends = Ends(tree.resources.runs)
    with tree.client("owner") as client, tree.client("other") as other:
        baseline = tree.refs.count()
        started = []
        for i in range(3):  # one at a time: the service remembers refs in exit order
            started.append(client.start_agent_run("quick", state={"topic": str(i)}))
            ends.wait(i + 1)
            wait_until(lambda: tree.refs.count() == baseline, 30, f"run {i} forgotten")
        for run in started[1:]:  # the last MAX_ENDED_REFS are remembered
            client.cancel_agent_run(run.ref)
        assert raises_kind(other.cancel_agent_run, started[2].ref) == "not_owner"
        assert raises_kind(client.cancel_agent_run, started[0].ref) == "not_owner"  # forgotten


def test_the_record_keeps_the_trace_id_of_the_request_that_started_a_run(
    parts: tuple[ServiceRuns, Any, RunLog],
) -> None:
    from phloem.base import telemetry

    runs, sup, record = parts
    ends = Ends(record)
    owner = Owner.client("probe")
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    with telemetry.attached({"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}):
        traced = runs.start(owner, "traced", _launch(sup, lambda run: run.end("done")))
    ends.wait(1)
    untraced = runs.start(owner, "untraced", _launch(sup, lambda run: run.end("done")))
    ends.wait(2)
    kept = {r.id: r.trace_id for r in record.runs()}
    assert kept == {traced.id: trace_id, untraced.id: ""}


def test_the_record_forgets_the_earliest_begun_ended_run_whatever_the_end_order() -> None:
    record = RunLog(max_runs=3, max_events=3)
    owner = Owner.client("order")
    a, b, c = (record.begin("agent", n, owner) for n in "abc")
    record.finish(c, "done", None, 1.0)
    record.finish(a, "done", None, 2.0)  # ended after c, begun before it: goes first
    record.begin("agent", "d", owner)
    assert [r.name for r in record.runs()] == ["b", "c", "d"]
    record.begin("agent", "e", owner)
    assert [r.name for r in record.runs()] == ["b", "d", "e"]
    record.discard(b)  # a run gone by other means is never chosen again
    d = next(e for e in record._runs.values() if e.name == "d")
    record.finish(d, "done", None, 3.0)
    record.begin("agent", "f", owner)
    record.begin("agent", "g", owner)  # d ended: it goes, not the older running e
    assert [r.name for r in record.runs()] == ["e", "f", "g"] and record.forgotten == 3
