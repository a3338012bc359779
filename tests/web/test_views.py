"""The rendered sections: content-free, escaped, telemetry on and off, eval reports,
run events from tree snapshots, and the bounded fan-out to browsers."""

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
from phloem.web import views
from phloem.web.app import MAX_REPORT_FILES, read_report, read_reports
from phloem.web.hub import Follower, Hub, TooManyFollowers, cancel_and_wait, sse_frame
from phloem.web.runs import MAX_ENDED_RUNS, MAX_RUN_EVENTS, RunTracker
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
    assert "daemon unreachable: no_daemon" in views.summary(None, "no_daemon")


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


def _snapshot(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "roots": [
            {
                "id": "phloem",
                "type": "supervisor",
                "state": "running",
                "children": [
                    {
                        "id": "agents",
                        "type": "supervisor",
                        "state": "running",
                        "children": [
                            {
                                "id": "runs",
                                "type": "supervisor",
                                "state": "running",
                                "children": runs,
                            },
                            {"id": "service", "type": "actor", "state": "running"},
                        ],
                    }
                ],
            }
        ]
    }


def _run(rid: str, *children: str, restarts: int = 0) -> dict[str, Any]:
    return {
        "id": rid,
        "type": "supervisor",
        "state": "running",
        "restarts": restarts,
        "children": [{"id": c, "type": "actor", "state": "running"} for c in children],
    }


def test_run_events_come_from_successive_snapshots() -> None:
    tracker = RunTracker()
    assert tracker.update(_snapshot([_run("agent-run:a-1", "driver")]), now=1.0)
    assert not tracker.update(_snapshot([_run("agent-run:a-1", "driver")]), now=2.0)
    tracker.update(_snapshot([_run("agent-run:a-1", "driver", "stepA#1")]), now=3.0)
    tracker.update(_snapshot([_run("agent-run:a-1", "driver", restarts=1)]), now=4.0)
    tracker.update(_snapshot([]), now=5.0)
    (run,) = tracker.views()
    assert run.key == "phloem/agents/runs/agent-run:a-1" and run.service == "agents"
    assert [text for _, text in run.events] == [
        "started (running)",
        "step started: driver",
        "step started: stepA#1",
        "restarted (1)",
        "step ended: stepA#1",
        "step ended: driver",
        "ended",
    ]
    assert run.ended_at == 5.0 and 'data-state="ended"' in views.runs(tracker.views())


def test_run_events_and_ended_runs_are_bounded() -> None:
    tracker = RunTracker()
    for i in range(MAX_RUN_EVENTS + 10):
        tracker.update(_snapshot([_run("r", f"step{i}")]), now=float(i))
    (run,) = tracker.views()
    assert len(run.events) == MAX_RUN_EVENTS and run.events_dropped > 0
    assert f"({run.events_dropped} older events dropped)" in views.runs([run])
    for i in range(MAX_ENDED_RUNS + 5):
        tracker.update(_snapshot([_run(f"n{i}")]), now=1000.0 + i)
    tracker.update(_snapshot([]), now=2000.0)
    assert len(tracker.ended) == MAX_ENDED_RUNS


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
    assert "daemon unreachable: no_daemon" in hub.rendered["summary"]
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
