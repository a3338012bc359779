"""The web view in a real browser (headless Chromium driven by Playwright).

One daemon (with a restartable `holder` service, a slow two-step agent and scripted
planning adapters), one `phloem web` process and one browser serve the module: the tree
renders, a restart shows within 1 s without a reload, a planning run's `plan_accepted`
and `step_started` show while it runs and its outcome once it ended, an eval report
renders, a non-loopback request without the token is refused (401), and a slow client is
dropped without growing the daemon's (or the web process's) memory.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import phloem
from phloem.protocols.evalreport import CaseResult, EvalReport, SampleResult, encode_json
from tests.daemon.fixture_services import Die
from tests.helpers import DaemonProc, running_daemon, short_tmpdir, wait_until
from tests.web.webproc import (
    BROWSER_TIMEOUT_MS,
    SLEEPING_PLAN,
    WEB_CONFIG,
    browser_or_skip,
    running_web,
)

pytestmark = pytest.mark.timeout(600)  # generous: browsers on a loaded machine

RESTART_VISIBLE_S = 1.0  # the bound: restart event → DOM update


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(WEB_CONFIG) as d:
        yield d


@pytest.fixture(scope="module")
def reports() -> Iterator[Path]:
    d = short_tmpdir()
    yield d


@pytest.fixture(scope="module")
def web(daemon: DaemonProc, reports: Path) -> Iterator[Any]:
    with running_web(daemon.socket, "--listen", "127.0.0.1:0", "--reports", str(reports)) as w:
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
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    p = context.new_page()
    yield p
    context.close()


def _live(page: Any) -> None:
    """Wait until the page follows the event stream."""
    page.wait_for_selector("#conn.live")


def test_the_tree_renders(web: Any, page: Any) -> None:
    page.goto(web.url + "/")
    echo = page.wait_for_selector('tr[data-path="phloem/echo"]')
    assert echo.get_attribute("data-state") == "running"
    holder = page.locator('tr[data-path="phloem/holder"] td').all_inner_texts()
    assert holder[0] == "holder" and holder[1] == "actor" and holder[2] == "running"
    assert holder[4].startswith("HolderService")  # the actor's thread
    assert "actors" in page.inner_text("#s-summary")
    _live(page)


def test_a_restart_shows_within_a_second_without_reload(
    daemon: DaemonProc, web: Any, page: Any
) -> None:
    page.goto(web.url + "/")
    _live(page)
    before = int(page.get_attribute('tr[data-path="phloem/holder"]', "data-restarts"))
    page.evaluate(
        """(want) => {
            window.__notReloaded = true;
            const seen = () => document.querySelector(
                `tr[data-path="phloem/holder"][data-restarts="${want}"]`);
            new MutationObserver((_, obs) => {
                if (seen()) { window.__restartSeenAt = Date.now(); obs.disconnect(); }
            }).observe(document.getElementById("s-tree"), {childList: true, subtree: true});
        }""",
        str(before + 1),
    )
    with phloem.Client.connect(daemon.socket) as client:
        assert client.ask("holder", Die()) == "dying"
        restarted_at = time.time()  # the actor exits right after this reply; then restarts
    page.wait_for_function("() => window.__restartSeenAt !== undefined")
    seen_at = page.evaluate("window.__restartSeenAt") / 1000
    assert page.evaluate("window.__notReloaded") is True
    latency = seen_at - restarted_at
    assert latency < RESTART_VISIBLE_S, f"the restart showed after {latency:.3f} s"


def test_a_planning_runs_events_show_while_it_runs(daemon: DaemonProc, web: Any, page: Any) -> None:
    page.goto(web.url + "/runs")
    _live(page)
    page.evaluate("window.__notReloaded = true")
    with phloem.Client.connect(daemon.socket) as client:
        started = client.start_planning_run(SLEEPING_PLAN, "scripted", {"task": "web"})
        [mine] = [r for r in client.list_runs() if r.kind == "planning" and r.outcome is None]
        running = f'article.run[data-run="{mine.id}"][data-state="running"]'
        page.wait_for_selector(f'{running} li[data-kind="plan_accepted"]')
        page.wait_for_selector(f'{running} li[data-kind="step_started"]')
        events = page.locator(f"{running} li").all_inner_texts()
        assert any("step_id=s1" in e for e in events), events  # the step, never its action
        assert not any("sleep" in e for e in events), events
        assert client.cancel_planning(started.ref) is True
        page.wait_for_selector(f'article.run[data-run="{mine.id}"][data-state="cancelled"]')
        assert client.await_planning(started.ref, 30).status == "cancelled"
    ended = page.locator(f'article.run[data-run="{mine.id}"] li').all_inner_texts()
    assert "terminal" in ended[-1] and "status=cancelled" in ended[-1]
    assert page.evaluate("window.__notReloaded") is True


def test_an_agent_run_shows_with_its_steps_and_outcome(
    daemon: DaemonProc, web: Any, page: Any
) -> None:
    page.goto(web.url + "/runs")
    _live(page)
    with phloem.Client.connect(daemon.socket) as client:
        run = client.run_agent("slowPair", state={"topic": "web"})
        assert run.ok
        mine = [r for r in client.list_runs() if r.kind == "agent" and r.name == "slowPair"][-1]
    article = page.wait_for_selector(f'article.run[data-run="{mine.id}"][data-state="done"]')
    events = article.inner_text()
    assert "author=stepA" in events and "author=stepB" in events
    assert "b(a(3))" not in events  # the agents' outputs stay out of the record


def _report() -> EvalReport:
    def case(cid: str, status: Any, score: float, passed: int) -> CaseResult:
        samples = [
            SampleResult(id=f"{cid}#{i}", index=i, status="passed" if i < passed else "failed")
            for i in range(2)
        ]
        return CaseResult(
            cid, status, {"response_match": score}, [], samples, passed_samples=passed
        )

    return EvalReport(
        eval_set_id="helpdesk",
        status="failed",
        pass_rate=0.5,
        metrics={"response_match": 0.75},
        cases=[case("greeting", "passed", 1.0, 2), case("weather-oslo", "failed", 0.5, 0)],
        agent="helpdesk",
        thresholds={"response_match": 0.8},
        samples=2,
    )


def test_an_eval_report_renders(web: Any, reports: Path, page: Any) -> None:
    (reports / "helpdesk.json").write_bytes(encode_json(_report()))
    (reports / "broken.json").write_text("{not json")
    page.goto(web.url + "/evals")
    page.click('tr[data-report="helpdesk.json"] a')
    page.wait_for_selector("p.report")
    assert page.inner_text(".pass-rate") == "50.0%"
    assert page.get_attribute('tr[data-case="greeting"]', "data-status") == "passed"
    failed = page.locator('tr[data-case="weather-oslo"] td').all_inner_texts()
    assert failed[:3] == ["weather-oslo", "failed", "0/2"] and failed[3] == "0.500"
    page.goto(web.url + "/evals")
    broken = page.locator("tr", has_text="broken.json").inner_text()
    assert "not an eval report" in broken


def _outward_ip() -> str | None:
    """An address of this machine that is not loopback (None if it has none)."""
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    return None


def test_a_non_loopback_request_without_the_token_is_refused(
    daemon: DaemonProc, browser: Any
) -> None:
    ip = _outward_ip()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address to test against")
    token = "t0ken-" + "x" * 20
    env = {"PHLOEM_WEB_TOKEN": token}
    with running_web(daemon.socket, "--listen", f"{ip}:0", env=env) as web:
        context = browser.new_context()
        context.set_default_timeout(BROWSER_TIMEOUT_MS)
        page = context.new_page()
        for path in ("/", "/events?sections=tree", "/api/stats", "/static/phloem.js"):
            response = page.goto(web.url + path)
            assert response.status == 401, path
        page.goto(web.url + "/")
        page.fill("input[name=token]", "wrong-token-" + "y" * 10)
        page.click("form button")
        assert "wrong token" in page.inner_text("main")
        page.fill("input[name=token]", token)
        page.click("form button")
        page.wait_for_selector('tr[data-path="phloem/echo"]')
        page.wait_for_selector("#conn.live")  # the event stream carries the cookie too
        context.close()
        bearer = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
        assert bearer.new_page().goto(web.url + "/api/stats").status == 200
        bearer.close()


def test_a_non_loopback_listen_without_a_token_does_not_start(daemon: DaemonProc) -> None:
    from tests.helpers import run_cli

    result = run_cli("web", "--socket", str(daemon.socket), "--listen", "0.0.0.0:0")
    assert result.returncode == 1
    assert "PHLOEM_WEB_TOKEN" in result.stderr and "not loopback" in result.stderr


@pytest.mark.slow  # about 40 s: the slow client's socket buffers fill first
def test_a_slow_client_is_dropped_without_growing_memory(
    daemon: DaemonProc, browser: Any, tmp_short: Path
) -> None:
    config = tmp_short / "web.toml"
    config.write_text("[web]\nclient_queue = 8\nwrite_timeout_s = 2.0\nrefresh_ms = 50\n")
    with running_web(daemon.socket, "--config", str(config), "--listen", "127.0.0.1:0") as web:
        page = browser.new_context().new_page()
        page.set_default_timeout(BROWSER_TIMEOUT_MS)
        page.goto(web.url + "/")
        page.wait_for_selector("#conn.live")
        daemon_rss = psutil.Process(daemon.proc.pid).memory_info().rss
        web_rss = web.stats()["rss_bytes"]
        slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and it never reads
        slow.connect(("127.0.0.1", web.port))
        slow.sendall(
            b"GET /events?sections=summary,tree,runs,live,telemetry HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\n\r\n"
        )
        wait_until(lambda: web.stats()["followers_dropped"] >= 1, 180, "the slow client dropped")
        stats = web.stats()
        assert stats["followers"] == 1  # the browser still follows
        # The server aborted the slow connection: reading it ends (EOF or reset).
        slow.settimeout(30)
        with pytest.raises(ConnectionResetError):
            while slow.recv(1 << 20):
                pass
            raise ConnectionResetError  # a clean EOF counts too
        slow.close()
        grew_daemon = psutil.Process(daemon.proc.pid).memory_info().rss - daemon_rss
        grew_web = web.stats()["rss_bytes"] - web_rss
        assert grew_daemon < 8 * 1024 * 1024, grew_daemon
        assert grew_web < 16 * 1024 * 1024, grew_web
        before = page.get_attribute("#s-tree", "data-updated-at")
        wait_until(
            lambda: page.get_attribute("#s-tree", "data-updated-at") != before,
            60,
            "the browser still gets updates",
        )
        page.context.close()
