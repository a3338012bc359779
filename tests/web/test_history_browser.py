"""The web view's history pages in a real browser (headless Chromium driven by Playwright).

One daemon (a restartable `holder` service, the slow two-step agent, a session store with
a compacted session), one `phloem web` and one browser serve the module: every page
renders from this machine only (no request leaves the web view's origin, no script
error); a new run appears on the Runs page within 1 s without a reload and its own page
draws its timeline live up to its outcome; the runs filter holds across live updates; a
session's transcript shows its compaction decisions and its markup as text; the plots
and the tree's sparklines get points; and — last, since it stops the daemon — a daemon
that went away shows as disconnected (since when), never as live.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import phloem
from tests.daemon.fixture_services import Die
from tests.helpers import DaemonProc, running_daemon, short_tmpdir
from tests.web.webproc import (
    BROWSER_TIMEOUT_MS,
    UNTRUSTED_TEXT,
    WEB_CONFIG,
    browser_or_skip,
    running_web,
    seed_sessions,
)

pytestmark = pytest.mark.timeout(600)  # generous: browsers on a loaded machine

VISIBLE_S = 1.0  # the bound: a restart or a new run → DOM update
WINDOW = phloem.CreditWindow(256, 8 << 20)


@pytest.fixture(scope="module")
def store() -> Iterator[tuple[Path, str]]:
    root = short_tmpdir()
    session = seed_sessions(root / "sessions")
    yield root / "sessions", session
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(store: tuple[Path, str]) -> Iterator[DaemonProc]:
    with running_daemon(f'[sessions]\ndir = "{store[0]}"\n' + WEB_CONFIG) as d:
        yield d


@pytest.fixture(scope="module")
def web(daemon: DaemonProc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    config = tmp_path_factory.mktemp("web") / "web.toml"
    config.write_text('[web]\ntrace_url = "http://127.0.0.1:16686/trace/{trace_id}"\n')
    with running_web(daemon.socket, "--config", str(config), "--listen", "127.0.0.1:0") as w:
        yield w


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    manager, browser = browser_or_skip()
    try:
        yield browser
    finally:
        browser.close()
        manager.stop()


@pytest.fixture
def page(browser: Any, web: Any) -> Iterator[Any]:
    """A page that records every request leaving the web view and every script error."""
    context = browser.new_context()
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    p = context.new_page()
    foreign: list[str] = []
    errors: list[str] = []

    def console(message: Any) -> None:
        where = str((message.location or {}).get("url", ""))
        if message.type == "error" and not where.endswith("/favicon.ico"):
            errors.append(f"{message.text} ({where})")

    p.on("request", lambda r: None if r.url.startswith(web.url) else foreign.append(r.url))
    p.on("pageerror", lambda err: errors.append(str(err)))
    p.on("console", console)
    yield p
    assert foreign == [], foreign  # offline: nothing fetched from elsewhere
    assert errors == [], errors  # no script error, no CSP violation
    context.close()


def _live(page: Any) -> None:
    page.wait_for_selector("#conn.live")


def _watch(page: Any, selector: str, section: str) -> None:
    """Record in the page when `selector` first appears in `#s-SECTION` (no reload)."""
    page.evaluate(
        """([selector, section]) => {
            window.__notReloaded = true;
            window.__seenAt = undefined;
            new MutationObserver((_, obs) => {
                if (document.querySelector(selector)) {
                    window.__seenAt = Date.now(); obs.disconnect();
                }
            }).observe(document.getElementById("s-" + section), {childList: true, subtree: true});
        }""",
        [selector, section],
    )


def _seen_after(page: Any, since: float) -> float:
    page.wait_for_function("() => window.__seenAt !== undefined")
    assert page.evaluate("window.__notReloaded") is True
    return float(page.evaluate("window.__seenAt")) / 1000 - since


@pytest.mark.parametrize(
    ("path", "ready"),
    [
        ("/", 'tr[data-path="phloem/echo"]'),
        ("/runs", "form.filter"),
        ("/sessions", 'tr[data-session="s-compacted"]'),
        ("/sessions/s-compacted", "ol.transcript"),
        ("/agents", 'tr[data-agent="slowPair"]'),
        ("/live", "#s-live"),
        ("/plots", "svg.chart"),
        ("/evals", "#s-summary"),
        ("/telemetry", "#s-telemetry"),
    ],
)
def test_each_page_renders_from_this_machine_only(
    web: Any, page: Any, path: str, ready: str
) -> None:
    response = page.goto(web.url + path)
    assert response.status == 200
    page.wait_for_selector(ready)
    _live(page)


def test_a_new_run_appears_within_a_second_and_its_page_draws_its_timeline(
    daemon: DaemonProc, web: Any, page: Any
) -> None:
    page.goto(web.url + "/runs")
    _live(page)
    with phloem.Client.connect(daemon.socket) as client:
        known = {r.id for r in client.list_runs()}
        _watch(page, "article.run[data-kind=agent][data-state=running]", "runs")
        at = time.time()  # the run is in the record before its start returns
        started = client.start_agent_run("slowPair", state={"topic": "timeline"})
        follower = threading.Thread(target=lambda: list(client.subscribe(started.stream, WINDOW)))
        follower.start()
        latency = _seen_after(page, at)
        print(f"new run visible after {latency:.3f} s (bound {VISIBLE_S} s)")
        assert latency < VISIBLE_S, f"the new run showed after {latency:.3f} s"
        [mine] = [r for r in client.list_runs() if r.id not in known and r.kind == "agent"]
        page.click(f'article.run[data-run="{mine.id}"] h2 a')
        page.wait_for_url(f"**/runs/{mine.id}")
        _live(page)
        detail = f'.run-detail[data-run="{mine.id}"]'
        page.wait_for_selector(f'{detail}[data-state="done"]')  # live, to its outcome
        follower.join(120)
    rows = page.locator(f"{detail} tr[data-what]").all_inner_texts()
    assert any("model stepA" in r for r in rows) and any("model stepB" in r for r in rows)
    points = int(page.get_attribute(f"{detail} svg.timeline", "data-points"))
    assert points == len(rows) >= 2
    assert "took" in page.inner_text(f"{detail} p")
    trace = page.locator(f"{detail} .trace")
    text = page.inner_text(detail)
    assert trace.count() == 1 or "no trace (telemetry off)" in text
    if trace.count() and trace.get_attribute("href"):
        assert trace.get_attribute("href").startswith("http://127.0.0.1:16686/trace/")


def test_the_runs_filter_holds_across_live_updates(daemon: DaemonProc, web: Any, page: Any) -> None:
    page.goto(web.url + "/runs?kind=agent&status=failed")
    _live(page)
    assert page.locator("select[name=kind]").input_value() == "agent"
    done = page.locator("article.run[data-state=done]")
    before = done.count()
    with phloem.Client.connect(daemon.socket) as client:
        assert client.run_agent("slowPair", state={"topic": "filter"}).ok
    page.wait_for_function(
        f"() => document.querySelectorAll('article.run[data-state=done]').length > {before}"
    )
    assert done.count() >= 1 and all(not done.nth(i).is_visible() for i in range(done.count()))
    assert page.locator("form.filter").count() == 1  # the form stays over the updates
    page.select_option("select[name=status]", "done")
    page.click("form.filter button")
    page.wait_for_url("**/runs?kind=agent&status=done")
    assert page.locator("article.run[data-state=done]").first.is_visible()


def test_a_transcript_marks_compaction_and_shows_markup_as_text(
    web: Any, page: Any, store: tuple[Path, str]
) -> None:
    page.goto(web.url + "/sessions")
    page.click(f'tr[data-session="{store[1]}"] a')
    page.wait_for_selector("ol.transcript")
    texts = page.locator("ol.transcript .text").all_inner_texts()
    assert UNTRUSTED_TEXT in texts  # shown as text, never run or parsed
    assert page.locator("ol.transcript img").count() == 0
    elided = page.locator("li.event.elided")
    assert elided.count() == 1 and "elided from model requests" in elided.inner_text()
    dropped = page.locator("li.event.dropped").all_inner_texts()
    assert len(dropped) == 2 and "an old question" in dropped[0] and "an old answer" in dropped[1]
    assert "1 events with elided results, 2 events in dropped turns" in page.inner_text(
        "p.compaction"
    )


def test_the_plots_and_sparklines_get_points_and_a_restart_shows_within_a_second(
    daemon: DaemonProc, web: Any, page: Any
) -> None:
    page.goto(web.url + "/")
    _live(page)
    holder = 'tr[data-path="phloem/holder"]'
    before = int(page.get_attribute(holder, "data-restarts"))
    _watch(page, f'{holder}[data-restarts="{before + 1}"]', "tree")
    with phloem.Client.connect(daemon.socket) as client:
        assert client.ask("holder", Die()) == "dying"
        at = time.time()
    latency = _seen_after(page, at)
    print(f"restart visible after {latency:.3f} s (bound {VISIBLE_S} s)")
    assert latency < VISIBLE_S, f"the restart showed after {latency:.3f} s"
    page.wait_for_function(  # two samples: a line (one every SAMPLE_INTERVAL_S)
        f"""() => [...document.querySelectorAll('{holder} svg.spark')]
                 .every(s => Number(s.dataset.points) >= 2)"""
    )
    with phloem.Client.connect(daemon.socket) as client:  # a run of its own, for the runs plot
        started = client.start_agent_run("slowPair", state={"topic": "plots"})
        list(client.subscribe(started.stream, WINDOW))
    page.goto(web.url + "/plots")
    _live(page)
    page.wait_for_function(
        "() => [...document.querySelectorAll('#s-plots svg.chart')].length === 4 &&"
        " [...document.querySelectorAll('#s-plots svg.chart')].slice(0, 3)"
        "   .every(s => Number(s.dataset.points) >= 2) &&"
        " Number(document.querySelectorAll('#s-plots svg.chart')[3].dataset.points) >= 1"
    )  # the runs per minute: this test's run at least
    restarts = page.locator("#s-plots svg.chart").nth(2).locator("polyline").get_attribute("points")
    assert restarts and len(restarts.split()) >= 2


def test_a_daemon_that_went_away_shows_as_disconnected(
    daemon: DaemonProc, web: Any, page: Any
) -> None:
    page.goto(web.url + "/")
    _live(page)
    assert page.locator("#s-tree table.stale").count() == 0
    stopped_at = time.time()
    assert daemon.stop() == 0
    page.wait_for_selector("#conn.down")
    assert page.locator("#conn.live").count() == 0
    conn = page.inner_text("#conn")
    assert conn.startswith("daemon disconnected since "), conn
    assert page.get_attribute("#s-summary [data-daemon]", "data-daemon") == "disconnected"
    since = float(page.get_attribute("#s-summary [data-daemon]", "data-since"))
    assert stopped_at - 1 <= since <= time.time()
    page.wait_for_selector("#s-tree table.stale")  # the last tree, marked stale
    assert "this is the last tree it gave" in page.inner_text("#s-tree")
    page.goto(web.url + "/runs")  # a page opened after the daemon went
    page.wait_for_selector("#conn.down")
    assert "daemon disconnected since" in page.inner_text("#s-summary")
