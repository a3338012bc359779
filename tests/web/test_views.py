"""The rendered sections: content-free, escaped, telemetry on and off, eval reports,
the runs of the tree's record with their updates, sessions, and the bounded fan-out to
browsers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from phloem.config import WebConfig
from phloem.protocols.evalreport import (
    MAX_REPORT_BYTES,
    CaseResult,
    EvalReport,
    SampleResult,
    encode_json,
)
from phloem.protocols.runs import (
    RunBegan,
    RunFinished,
    RunForgotten,
    RunMissed,
    RunNote,
    RunNoted,
    RunSummary,
)
from phloem.web import views
from phloem.web.app import MAX_REPORT_FILES, read_report, read_reports
from phloem.web.hub import Follower, Hub, TooManyFollowers, cancel_and_wait, sse_frame
from phloem.web.runs import MAX_RUN_EVENTS, MAX_RUNS, RunBoard
from tests.helpers import run_cli

STATUS: dict[str, Any] = {
    "version": "0.1.0",
    "pid": 42,
    "state": "running",
    "uptime_s": 75.0,
    "actors": 5,
    "processes": 1,
    "restarts": 2,
    "rss_bytes": 50 << 20,
    "connections": 3,
}


def test_telemetry_counters_render_from_the_status_key() -> None:
    status = {**STATUS, "telemetry": {"exported": 1234, "dropped": 5, "failed": 1, "queued": 0}}
    html = views.telemetry(status)
    for name, value in (("exported", "1234"), ("dropped", "5"), ("failed", "1"), ("queued", "0")):
        assert f'<tr data-counter="{name}"><td>{name}</td><td class=num>{value}</td></tr>' in html
    assert "telemetry: 1234 exported, 5 dropped" in views.summary(status, None)


def test_telemetry_off_when_the_status_has_no_key_or_says_disabled() -> None:
    assert "telemetry off" in views.telemetry(STATUS)
    assert "telemetry off" in views.telemetry(None)
    assert "telemetry off" in views.summary(STATUS, None)
    disabled = {**STATUS, "telemetry": {"enabled": False, "exported": 0, "dropped": 0}}
    assert "telemetry off" in views.telemetry(disabled)
    assert "telemetry off" in views.summary(disabled, None)
    enabled = {**STATUS, "telemetry": {"enabled": True, "exported": 3, "dropped": 0}}
    assert "telemetry: 3 exported, 0 dropped" in views.summary(enabled, None)


def test_values_are_escaped_and_live_shows_only_allow_listed_fields() -> None:
    session = {
        "session": 1,
        "state": "<b>open</b>",
        "model": "m",
        "reconnects": 0,
        "turn_epoch": 3,
        "generation_epoch": 1,
        "owner": "alice",
        "api_key": "sk-secret",
        "audio": "AAAA",
        "opened_at": 0.0,
    }
    html = views.live([session])
    assert "&lt;b&gt;open&lt;/b&gt;" in html and "<b>open" not in html
    assert "sk-secret" not in html and "AAAA" not in html and "alice" not in html
    assert "<td>3</td><td>1</td>" in html  # turn and generation epochs
    assert "daemon disconnected: no_daemon" in views.summary(None, "no_daemon")
    gone = views.summary({"pid": 1}, "connection_lost", down_since=3661.0)
    assert "data-daemon=disconnected" in gone and "since 01:01:01 UTC" in gone


def test_the_tree_renders_each_node_with_its_restarts() -> None:
    node = {
        "id": "phloem",
        "type": "supervisor",
        "state": "running",
        "strategy": "one_for_one",
        "children": [
            {
                "id": "w",
                "type": "process",
                "state": "running",
                "restarts": 2,
                "pid": 99,
                "rss_bytes": 3 << 20,
                "rss_cap_bytes": 64 << 20,
                "tree_rss_bytes": 4 << 20,
                "mailbox_depth": 7,
                "credit_in_use": 1,
            },
            {
                "id": "r",
                "type": "process",
                "state": "running",
                "pid": 7,
                "node": "10.0.0.7/3f2a9c1b",
            },
        ],
    }
    html = views.tree(
        {
            "roots": [node],
            "actors": 0,
            "processes": 2,
            "supervisors": 1,
            "threads": 3,
            "taken_at": 0.0,
        }
    )
    assert '<tr data-path="phloem/w" data-state="running" data-restarts="2">' in html
    assert "pid 99" in html and "3.0 MiB (tree 4.0 MiB / cap 64.0 MiB)" in html
    assert "<td>pid 7 on 10.0.0.7/3f2a9c1b</td>" in html  # a child on a Ray worker


def _summary(rid: str, at: float, **fields: Any) -> RunSummary:
    return RunSummary(
        id=rid, kind="planning", name="p / e", owner="client t", started_at=at, **fields
    )


def test_the_runs_board_folds_each_update_into_the_record() -> None:
    board = RunBoard()
    board.reset([_summary("planning-1", 1.0, outcome="done", ended_at=1.5)])
    board.apply(RunBegan(_summary("planning-2", 2.0)))
    note = RunNote(1, 2.1, "plan_accepted", {"plan_id": "p<1>", "steps": 2})
    board.apply(RunNoted("planning-2", note))
    board.apply(RunNoted("planning-2", RunNote(2, 2.2, "step_started", {"step_id": "s1"})))
    html = views.runs(board.views())
    running, ended = board.views()
    assert running.id == "planning-2" and running.event_count == 2 and ended.id == "planning-1"
    assert '<article class="run active" data-run="planning-2" data-kind="planning"' in html
    assert 'data-state="running" data-events="2"' in html
    assert '<li data-kind="plan_accepted">' in html and "plan_id=p&lt;1&gt;" in html
    assert '<li data-kind="step_started">' in html
    board.apply(RunFinished("planning-2", 3.0, "failed", "executor_failed"))
    html = views.runs(board.views())
    assert 'data-run="planning-2" data-kind="planning" data-state="failed"' in html
    assert "<span class=bad>executor_failed</span>" in html and "took 1.000 s" in html
    board.apply(RunForgotten("planning-1"))
    assert [r.id for r in board.views()] == ["planning-2"]
    board.apply(RunNoted("nobody", note))  # a run it does not know changes nothing
    assert not board.missed
    board.apply(RunMissed(3))
    assert board.missed  # the hub reads the whole record again
    assert "runs unavailable: unknown_actor" in views.runs([], "unknown_actor")
    assert "no runs yet" in views.runs([])


def test_the_runs_board_keeps_its_bounds() -> None:
    board = RunBoard()
    board.reset([])
    board.apply(RunBegan(_summary("old", 0.0)))
    board.apply(RunFinished("old", 0.5, "done"))
    board.apply(RunBegan(_summary("live", 0.1)))
    for i in range(MAX_RUNS - 1):
        board.apply(RunBegan(_summary(f"r{i}", 1.0 + i)))
    assert len(board.runs) == MAX_RUNS and "old" not in board.runs  # an ended one went first
    assert "live" in board.runs
    for i in range(MAX_RUN_EVENTS + 3):
        board.apply(RunNoted("live", RunNote(i + 1, 2.0, "agent_event")))
    live = board.runs["live"]
    assert len(live.events) == MAX_RUN_EVENTS and live.events_dropped == 3
    assert live.event_count == MAX_RUN_EVENTS + 3 and live.events[0].seq == 4
    assert "(3 older events)" in views.runs([live])


def test_the_sessions_page_shows_each_session_without_its_transcript() -> None:
    listed = [
        {
            "id": "s<1>",
            "agent": "coder",
            "workdir": "/w",
            "events": 12,
            "busy": True,
            "updated": 0.0,
            "transcript": "/secret/place.jsonl",
        },
        {"id": "s2", "agent": "coder", "workdir": "/w", "events": None, "busy": False},
    ]
    html = views.sessions(listed)
    assert (
        '<tr data-session="s&lt;1&gt;" data-busy="yes">'
        '<td><a href="/sessions/s&lt;1&gt;">s&lt;1&gt;</a></td>' in html
    )
    assert "<td>coder</td><td>/w</td><td>12</td><td>busy</td>" in html
    assert "<td>&ndash;</td><td>idle</td>" in html  # events not known without reading
    assert "/secret/place.jsonl" not in html
    assert "no sessions" in views.sessions([])
    assert "Sessions unavailable: unknown_actor" in views.sessions(None, "unknown_actor")


def test_a_follower_is_dropped_at_its_queue_limit_not_buffered() -> None:
    async def go() -> None:
        follower = Follower(frozenset({"tree"}), limit=3)
        assert all(follower.offer(sse_frame("tree", f"<p>{i}</p>")) for i in range(3))
        assert not follower.dropped
        assert not follower.offer(sse_frame("tree", "<p>one too many</p>"))
        assert follower.dropped and not follower.queue and follower.wake.is_set()

    asyncio.run(go())


def test_an_sse_frame_carries_every_line_as_data() -> None:
    assert (
        sse_frame("tree", "<p>a</p>\n<p>b</p>")
        == b"event: tree\ndata: <p>a</p>\ndata: <p>b</p>\n\n"
    )
    assert sse_frame("x", "") == b"event: x\ndata: \n\n"


def test_an_eval_report_shows_pass_rate_and_each_case_without_content() -> None:
    error = {"kind": "timeout", "message": "prompt text sk-leaky"}
    sample = SampleResult(
        id="c#0",
        index=0,
        status="error",
        error=error,  # type: ignore[arg-type]
        judge={"rationale": "the model said something private"},
    )
    report = EvalReport(
        eval_set_id="s",
        status="failed",
        pass_rate=0.25,
        metrics={"m": 0.5},
        cases=[CaseResult("c", "error", {"m": None}, [], [sample])],
    )
    html = views.eval_report("r.json", report)
    assert (
        "25.0%" in html
        and 'data-case="c" data-status="error"' in html
        and "<td class=num>&ndash;</td>" in html
    )
    assert "sk-leaky" not in html and "private" not in html


def test_without_a_daemon_the_view_says_so_and_keeps_trying(tmp_short: Path) -> None:
    async def go() -> Hub:
        hub = Hub(tmp_short / "nobody.sock", WebConfig(), None)
        task = asyncio.create_task(hub.run())
        deadline = time.monotonic() + 30
        while hub.counters["poll_errors"] < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await cancel_and_wait(task)
        return hub

    hub = asyncio.run(go())
    assert hub.counters["poll_errors"] >= 2  # it retried
    assert "daemon disconnected since" in hub.rendered["summary"]
    assert "no_daemon" in hub.rendered["summary"]
    assert hub.stats()["connected"] is False


def test_at_most_max_clients_follow(tmp_short: Path) -> None:
    async def go() -> None:
        hub = Hub(tmp_short / "s.sock", WebConfig(max_clients=1), None)
        first = hub.follow(frozenset({"tree"}))
        with pytest.raises(TooManyFollowers):
            hub.follow(frozenset({"tree"}))
        hub.unfollow(first)
        hub.follow(frozenset({"tree"}))

    asyncio.run(go())


def test_report_files_are_bounded_in_number_and_size(tmp_short: Path) -> None:
    report = EvalReport(eval_set_id="s", status="passed", pass_rate=1.0, metrics={}, cases=[])
    for i in range(MAX_REPORT_FILES + 1):
        (tmp_short / f"r{i:03d}.json").write_bytes(encode_json(report))
    (tmp_short / "notes.txt").write_text("not a report name")
    listed = read_reports(tmp_short)
    assert len(listed) == MAX_REPORT_FILES and all(isinstance(r, EvalReport) for _, r in listed)
    big = tmp_short / "big.json"
    with big.open("wb") as f:
        f.truncate(MAX_REPORT_BYTES + 1)
    assert read_report(big) == f"larger than {MAX_REPORT_BYTES} bytes"
    (tmp_short / "bad.json").write_text('{"schema_version": 1}')
    assert str(read_report(tmp_short / "bad.json")).startswith("not an eval report")


def test_phloem_web_is_off_without_an_address() -> None:
    result = run_cli("web", "--socket", "/nonexistent/phloem.sock")
    assert result.returncode == 2
    assert "the web view is off: pass --listen HOST:PORT or set [web] listen" in result.stderr
    result = run_cli("web", "--socket", "/x.sock", "--listen", "127.0.0.1:1", "--refresh-ms", "49")
    assert result.returncode == 2 and "--refresh-ms" in result.stderr


def test_process_children_a_snapshot_counted_but_did_not_list_get_one_row() -> None:
    owner = {
        "id": "run",
        "type": "actor",
        "state": "running",
        "children": [{"id": "executor.execute", "type": "process", "state": "running", "pid": 5}],
        "unlisted_processes": 3,
    }
    root = {"id": "phloem", "type": "supervisor", "state": "running", "children": [owner]}
    html = views.tree({"roots": [root], "processes": 4})
    assert html.count("<tr data-path=") == 3
    assert '<tr data-unlisted="3">' in html and "… 3 more processes (not listed)" in html
    assert "4 processes" in html


def test_a_huge_tree_is_drawn_up_to_its_row_limit() -> None:
    def tree_of(n: int) -> dict[str, Any]:
        kids = [{"id": f"w{i}", "type": "actor", "state": "running"} for i in range(n - 1)]
        root = {"id": "phloem", "type": "supervisor", "state": "running", "children": kids}
        return {"roots": [root]}

    exact = views.tree(tree_of(views.MAX_TREE_ROWS))
    assert exact.count("<tr data-path=") == views.MAX_TREE_ROWS and "not shown" not in exact
    over = views.tree(tree_of(views.MAX_TREE_ROWS + 5))
    assert over.count("<tr data-path=") == views.MAX_TREE_ROWS
    assert "5 more nodes not shown" in over
