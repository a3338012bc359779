"""The web view's history and its drawings, without a daemon: the sampled series and
their named bounds (exactly at each limit and one over), per-minute run counts counted
once, the SVG plots' points, a run's timeline (kinds, durations), the runs filter, one
run's page, a transcript's bounds and compaction marks, and the run sections a browser
may follow."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from phloem.config import WebConfig, parse_config
from phloem.protocols.errors import PhloemError
from phloem.protocols.runs import RunNote, RunSummary
from phloem.web import history as hist, plotview, runview, sessionview, views
from phloem.web.history import History
from phloem.web.hub import MAX_RUN_SECTIONS, Hub
from phloem.web.plots import bars, chart, sparkline
from phloem.web.timeline import steps


def snapshot(n: int = 1, rss: int = 1000, mailbox: int = 2) -> dict[str, Any]:
    kids = [
        {
            "id": f"w{i}",
            "type": "actor",
            "state": "running",
            "rss_bytes": rss,
            "mailbox_depth": mailbox,
            "restarts": 1,
        }
        for i in range(n)
    ]
    root = {"id": "phloem", "type": "supervisor", "state": "running", "children": kids}
    return {"roots": [root], "threads": 7}


def test_one_sample_per_interval_and_at_most_max_samples_per_series() -> None:
    h = History()
    assert h.sample(snapshot(), {"rss_bytes": 5}, 0.0)
    assert not h.sample(snapshot(), {"rss_bytes": 5}, hist.SAMPLE_INTERVAL_S - 0.01)
    assert h.sample(snapshot(), {"rss_bytes": 5}, hist.SAMPLE_INTERVAL_S)
    for i in range(2, hist.MAX_SAMPLES):
        h.sample(snapshot(), {"rss_bytes": 5}, i * hist.SAMPLE_INTERVAL_S)
    assert len(h.daemon_rss) == hist.MAX_SAMPLES == len(h.children["phloem/w0"].rss)
    h.sample(snapshot(rss=9), {"rss_bytes": 6}, hist.MAX_SAMPLES * hist.SAMPLE_INTERVAL_S)
    assert len(h.daemon_rss) == hist.MAX_SAMPLES  # one over: the oldest went
    assert h.daemon_rss[0][0] == hist.SAMPLE_INTERVAL_S and h.daemon_rss[-1][1] == 6
    assert h.children["phloem/w0"].rss[-1][1] == 9 and h.daemon_threads[-1][1] == 7
    assert h.restarts[-1][1] == 1  # the tree's restarts, summed
    assert "phloem" not in h.children  # supervisors have no series of their own
    assert hist.MAX_SAMPLES * hist.SAMPLE_INTERVAL_S == hist.HISTORY_S


def test_at_most_max_child_series_the_one_seen_longest_ago_goes() -> None:
    h = History()
    h.sample(snapshot(hist.MAX_CHILD_SERIES), None, 0.0)
    assert len(h.children) == hist.MAX_CHILD_SERIES and h.forgotten_children == 0
    h.sample(snapshot(hist.MAX_CHILD_SERIES + 1), None, hist.SAMPLE_INTERVAL_S)
    assert len(h.children) == hist.MAX_CHILD_SERIES and h.forgotten_children == 1
    assert not h.daemon_rss  # no status read yet: no daemon RSS point


def test_runs_are_counted_once_per_minute_for_the_last_run_minutes() -> None:
    h = History()
    run = RunSummary(
        id="agent-1",
        kind="agent",
        name="a",
        owner="o",
        started_at=60.0,
        ended_at=125.0,
        outcome="done",
    )
    h.runs_read([run])
    h.runs_read([run])  # the record read again after a reconnect
    h.run_began("agent-1", 60.0)
    h.run_finished("agent-1", 125.0)
    assert h.started == {1: 1} and h.finished == {2: 1}
    points = h.per_minute(h.started, 150.0)
    assert len(points) == hist.RUN_MINUTES and points[-2] == (60.0, 1.0)
    last = (hist.RUN_MINUTES + 1) * 60.0
    h.run_began("agent-2", last)  # the minute RUN_MINUTES later: minute 1 goes
    assert h.started == {hist.RUN_MINUTES + 1: 1}
    h.run_began("agent-3", last - (hist.RUN_MINUTES - 1) * 60.0)  # exactly in the window
    assert len(h.started) == 2


def test_counted_run_ids_are_bounded() -> None:
    h = History()
    for i in range(hist.MAX_COUNTED_RUNS + 1):
        h.run_began(f"r{i}", 0.0)
    assert len(h._counted) == hist.MAX_COUNTED_RUNS and h.started[0] == hist.MAX_COUNTED_RUNS + 1


def test_plots_carry_their_points() -> None:
    points = [(0.0, 1.0), (5.0, 3.0), (10.0, 2.0)]
    spark = sparkline(points, 10.0, 900.0, "w0 rss <b>")
    assert 'data-points="3"' in spark and "w0 rss &lt;b&gt;" in spark and "<b>" not in spark
    assert sparkline([], 10.0, 900.0, "none").count('data-points="0"') == 1
    assert sparkline(points, 906.0, 900.0, "old").count('data-points="1"') == 1  # 0, 5 out
    drawn = chart("rss", [("rss", points)], 0.0, 10.0)
    assert 'data-points="3"' in drawn and re.search(r'points="[\d.]+,[\d.]+ ', drawn)
    assert 'data-points="2"' in bars(
        "runs", [("a", [(0, 1), (60, 0)]), ("b", [(0, 2), (60, 0)])], 0, 60
    )


def test_a_plot_marks_each_point_up_to_max_dots_then_only_the_last() -> None:
    from phloem.web.plots import MAX_DOTS

    def dots(n: int) -> int:
        return chart("c", [("c", [(float(i), 1.0) for i in range(n)])], 0.0, float(n)).count(
            "<circle"
        )

    assert dots(MAX_DOTS) == MAX_DOTS and dots(MAX_DOTS + 1) == 1


def test_the_plots_page_and_the_tree_sparklines_draw_the_history() -> None:
    h = History()
    for i in range(3):
        h.sample(snapshot(), {"rss_bytes": 10_000 + i}, i * hist.SAMPLE_INTERVAL_S)
    h.run_began("x", 0.0)
    now = 2 * hist.SAMPLE_INTERVAL_S
    page = plotview.plots(h, now)
    assert page.count("<svg class=chart") == 4
    assert re.findall(r'data-points="(\d+)"', page) == ["3", "3", "3", "1"]
    tree = views.tree(snapshot(), plotview.spark_for(h, now))
    assert '<tr data-path="phloem/w0"' in tree and tree.count('<svg class="spark"') == 2
    assert "memory · mailbox (15 min)" in tree


def note(seq: int, at: float, kind: str = "agent_event", **detail: Any) -> RunNote:
    return RunNote(seq, at, kind, detail)


def test_a_runs_timeline_names_each_event_and_times_calls() -> None:
    run = RunSummary(
        id="agent-7",
        kind="agent",
        name="a",
        owner="o",
        started_at=100.0,
        ended_at=104.0,
        outcome="failed",
        error="tool_failed",
        trace_id="ab" * 16,
        events=[
            note(1, 101.0, author="m", calls="read, grep"),
            note(2, 101.5, author="m", results="read, grep"),
            note(3, 102.0, "confirm", tool="write"),
            note(4, 102.5, "plan_accepted", revision=1, steps=2),
            note(5, 103.0, author="m", error="tool_failed"),
            note(6, 103.5, author="m"),
        ],
    )
    drawn = steps(run)
    assert [s.what for s in drawn] == ["model", "tool", "confirm", "plan", "error", "model"]
    assert drawn[0].duration_s == 1.0  # the model's wait since the run started
    assert drawn[1].duration_s == 0.5  # from the call to its result
    assert drawn[5].duration_s == 0.5 and drawn[2].duration_s is None
    page = runview.run_detail(run, run.id, "http://jaeger:16686/trace/{trace_id}", 110.0)
    assert f'href="http://jaeger:16686/trace/{"ab" * 16}"' in page
    assert 'data-points="6"' in page and 'data-state="failed"' in page
    assert '<tr data-what="tool" data-kind="agent_event">' in page and "0.500 s" in page
    plain = runview.run_detail(run, run.id, "", 110.0)
    assert f"<code class=trace>{'ab' * 16}</code>" in plain and 'href="http' not in plain
    off = runview.run_detail(msgspec_replace(run, trace_id=""), run.id, "", 110.0)
    assert "no trace (telemetry off)" in off
    assert "not in the record" in runview.run_detail(None, "agent-99", "", 0.0)
    cap = runview.MAX_TRACE_ID_CHARS
    long = runview.run_detail(msgspec_replace(run, trace_id="c" * (cap + 1)), run.id, "", 0.0)
    assert f">{'c' * cap}</code>" in long
    exact = runview.run_detail(msgspec_replace(run, trace_id="d" * cap), run.id, "", 0.0)
    assert f">{'d' * cap}</code>" in exact


def msgspec_replace(run: RunSummary, **changes: Any) -> RunSummary:
    import msgspec

    return msgspec.structs.replace(run, **changes)


def test_the_runs_filter_keeps_what_was_asked() -> None:
    def run(i: int, kind: str, outcome: Any) -> RunSummary:
        return RunSummary(
            id=f"{kind}-{i}", kind=kind, name="n", owner="o", started_at=0.0, outcome=outcome
        )

    runs = [run(1, "agent", None), run(2, "eval", "done"), run(3, "agent", "failed")]
    assert runview.wanted({"kind": "agent", "status": "failed"}) == ("agent", "failed")
    assert runview.wanted({"kind": "<x>", "status": "nope"}) == ("", "")
    assert [r.id for r in runview.matching(runs, "agent", "")] == ["agent-1", "agent-3"]
    assert [r.id for r in runview.matching(runs, "", "running")] == ["agent-1"]
    form = runview.filter_form("eval", "done")
    assert '<option value="eval" selected>' in form and '<option value="done" selected>' in form


def test_a_transcript_is_escaped_bounded_and_marks_compaction() -> None:
    long = "y" * (sessionview.MAX_PART_CHARS + 1)
    detail = {
        "summary": {"id": "s-1", "agent": "coder", "workdir": "/w"},
        "event_count": 5,
        "events": [
            {
                "id": "e1",
                "author": "user",
                "content": {"role": "user", "parts": [{"text": "<b>hi"}]},
            },
            {
                "id": "e2",
                "author": "coder",
                "content": {
                    "role": "model",
                    "parts": [{"function_call": {"name": "read", "args": {"path": "<x>"}}}],
                },
            },
            {
                "id": "e3",
                "author": "coder",
                "content": {
                    "role": "user",
                    "parts": [
                        {"function_response": {"name": "read", "response": {"output": long}}}
                    ],
                },
            },
            {"id": "e4", "author": "coder", "error": {"kind": "model_error", "message": "<m>"}},
        ],
        "compaction": {"elided": ["e3"], "dropped": ["e1"], "calibration": 1.5},
    }
    html = sessionview.transcript(detail)
    assert "&lt;b&gt;hi" in html and "<b>hi" not in html and "&lt;x&gt;" in html
    assert re.search(r"… \(\d+ more\)", html) and "y" * (sessionview.MAX_PART_CHARS - 20) in html
    assert (
        '<li class="event elided" data-event="e3"' in html and "elided from model requests" in html
    )
    assert '<li class="event dropped" data-event="e1"' in html and "turn dropped" in html
    assert "error model_error: &lt;m&gt;" in html and "1 older events not shown" in html
    assert "calibration 1.50" in html
    exact = sessionview.transcript(
        {
            "events": [
                {
                    "id": "e",
                    "author": "a",
                    "content": {
                        "role": "user",
                        "parts": [{"text": "z" * sessionview.MAX_PART_CHARS}],
                    },
                }
            ]
        }
    )
    assert "more)" not in exact and "compaction:" not in exact


def test_a_browser_follows_at_most_max_run_sections(tmp_short: Path) -> None:
    async def go() -> None:
        hub = Hub(tmp_short / "s.sock", WebConfig(), None)
        asked = {f"run:agent-{i}" for i in range(MAX_RUN_SECTIONS + 1)} | {"run:../x", "nope"}
        follower = hub.follow(frozenset(asked | {"summary"}))
        runs = {n for n in follower.sections if n.startswith("run:")}
        assert len(runs) == MAX_RUN_SECTIONS and "run:../x" not in runs
        assert "nope" not in follower.sections and "summary" in follower.sections
        assert all("not in the record" in hub.rendered[n] for n in runs)
        hub.unfollow(follower)
        assert not any(n.startswith("run:") for n in hub.rendered)  # nobody follows them

    asyncio.run(go())


def test_the_trace_url_is_an_http_link_or_nothing() -> None:
    assert parse_config('[web]\ntrace_url = "http://127.0.0.1:16686/trace/{trace_id}"\n')
    for bad in ("javascript:alert(1)", "ftp://x/{trace_id}"):
        with pytest.raises(PhloemError) as err:
            parse_config(f'[web]\ntrace_url = "{bad}"\n')
        assert err.value.kind == "config_invalid"


def test_at_most_max_transcript_reads_run_at_once(tmp_short: Path) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from phloem.web.access import Access
    from phloem.web.app import MAX_TRANSCRIPT_READS, READS, build_app

    async def go() -> list[int]:
        hub = Hub(tmp_short / "nobody.sock", WebConfig(), None)
        app = build_app(hub, Access(loopback=True))
        statuses = []
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            headers = {"Host": "127.0.0.1"}
            for _ in range(MAX_TRANSCRIPT_READS - 1):
                await app[READS].acquire()  # reads still going
            reply = await client.get("/sessions/s-1", headers=headers)
            statuses.append(reply.status)  # the last one allowed: read (no daemon: 502)
            await app[READS].acquire()
            reply = await client.get("/sessions/s-1", headers=headers)
            statuses.append(reply.status)
            assert "too many transcripts" in await reply.text()
        return statuses

    assert asyncio.run(go()) == [502, 503]
