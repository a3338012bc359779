"""`make screenshots`: a PNG of each web view page, for a reviewer to look at.

    python -m tests.web.screenshots OUTDIR

Starts a daemon on `conf/phloem.toml` (its `[live] base_url` pointed at the fake Live
server, so no key or network is needed; its session store seeded with a compacted
session), gives it something to show — a finished supplier-brief agent run, the
helpdesk eval (its JSON report saved for the eval pages), a slow two-step run still
going, an open Live session, a restart of the `holder` service — then `phloem web` and
headless Chromium, waits until the plots have `PLOT_POINTS` samples, and saves
`tree.png`, `runs.png`, `run.png` (one run's timeline), `sessions.png`, `session.png`
(a transcript with its compaction decisions marked), `agents.png`, `live.png`,
`plots.png`, `evals.png`, `eval-report.png` and `telemetry.png` (from the running
daemon: "telemetry off" until its status carries a `telemetry` key), then
`telemetry-counters.png`: the same page rendered from a status that has the key
(`SAMPLE_TELEMETRY`, made up), and last `disconnected.png`: the tree once the daemon
has gone.
"""

from __future__ import annotations

import re
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.examples.helpdesk_eval import CRITERIA, EVALSET
from phloem.protocols.evalreport import encode_json
from tests.daemon.fixture_services import Die
from tests.helpers import ROOT, DaemonProc, short_tmpdir
from tests.web.webproc import (
    BROWSER_TIMEOUT_MS,
    CHROMIUM,
    SEEDED_SESSION,
    SLOW_AGENT_CONFIG,
    WebProc,
    seed_sessions,
)

PAGES = [
    ("tree", "/", 'tr[data-path="phloem/echo"]'),
    ("runs", "/runs", "article.run"),
    ("run", "/runs/{run}", ".run-detail"),
    ("sessions", "/sessions", "#s-sessions"),
    ("session", f"/sessions/{SEEDED_SESSION}", "ol.transcript"),
    ("agents", "/agents", "#s-agents"),
    ("live", "/live", "tr[data-session]"),
    ("plots", "/plots", "svg.chart"),
    ("evals", "/evals", "tr[data-report]"),
    ("eval-report", "/evals/helpdesk.json", "p.report"),
    ("telemetry", "/telemetry", "#s-telemetry"),
]
WINDOW = phloem.CreditWindow(256, 8 << 20)
SAMPLE_TELEMETRY = {"exported": 18_342, "dropped": 12, "failed": 1, "queued": 3}
PLOT_POINTS = 3  # samples the plots have before their screenshot (one per SAMPLE_INTERVAL_S)
HOLDER = 'holder = "tests.daemon.fixture_services:HolderService"\n'


def _config(live_url: str, sessions: Path) -> str:
    text = (ROOT / "conf" / "phloem.toml").read_text()
    text = re.sub(r'(?m)^base_url = "wss://[^"]*"', f'base_url = "{live_url}"', text)
    text = re.sub(r'(?m)^dir = ""', f'dir = "{sessions}"', text, count=1)
    text = re.sub(r"(?m)^\[services\.extra\]\n", "[services.extra]\n" + HOLDER, text, count=1)
    return text + "\n# --- the screenshots' slow two-step agent ---" + SLOW_AGENT_CONFIG


def _counters(page: Any, web: WebProc, socket: Path, out: Path) -> None:
    """The telemetry page rendered from a status with the `telemetry` key (no script)."""
    from phloem.web import views

    with phloem.Client.connect(socket) as client:
        status = msgspec.to_builtins(client.status())
    status["telemetry"] = SAMPLE_TELEMETRY
    sections = {"summary": views.summary(status, None), "telemetry": views.telemetry(status)}
    html = views.page("/telemetry", "", sections).replace(
        '<script src="/static/phloem.js">', "<script>"
    )
    page.goto(web.url + "/telemetry")
    page.set_content(html)
    page.add_style_tag(content=(ROOT / "phloem/web/static/phloem.css").read_text())
    page.screenshot(path=str(out / "telemetry-counters.png"), full_page=True)
    print(f"screenshots: {out / 'telemetry-counters.png'}")


def main(out: Path) -> int:
    if not CHROMIUM.exists():
        print(f"screenshots: skipped, {CHROMIUM} is not installed (make browser)")
        return 0
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    work = short_tmpdir()
    reports = work / "reports"
    reports.mkdir()
    with FakeLiveServer() as live_server:
        config = work / "phloem.toml"
        seed_sessions(work / "sessions")
        config.write_text(_config(live_server.url, work / "sessions"))
        daemon = DaemonProc(work / "phloem.sock", config).wait_ready()
        web = None
        try:
            with phloem.Client.connect(daemon.socket) as client:
                brief = client.start_agent_run("supplierBrief", state={"company": "Acme Corp"})
                list(client.subscribe(brief.stream, WINDOW))
                [brief_run] = [r for r in client.list_runs() if r.name == "supplierBrief"]
                report = client.run_eval(EVALSET, agent="helpdesk", criteria=CRITERIA)
                (reports / "helpdesk.json").write_bytes(encode_json(report))
                ref = client.live_open({"response_modalities": ["TEXT"]})
                events = client.live_events(ref, WINDOW)
                for event in events:
                    if event.kind == "ready":
                        client.live_send(ref, text="hello")
                    if event.kind == "turn_complete":
                        break
                web = WebProc(daemon.socket, "--listen", "127.0.0.1:0", "--reports", str(reports))
                slow = client.start_agent_run("slowPair", state={"topic": "screenshots"})
                follower = threading.Thread(
                    target=lambda: list(client.subscribe(slow.stream, WINDOW)), daemon=True
                )
                with sync_playwright() as pw:
                    browser = pw.chromium.launch(
                        executable_path=str(CHROMIUM), args=["--no-sandbox"]
                    )
                    page = browser.new_page(viewport={"width": 1280, "height": 900})
                    page.set_default_timeout(BROWSER_TIMEOUT_MS)
                    page.goto(web.url + "/runs")
                    page.wait_for_selector("#conn.live")
                    follower.start()
                    page.wait_for_function(
                        "() => document.querySelectorAll('article.run li').length > 8"
                    )
                    assert client.ask("holder", Die()) == "dying"  # one restart to plot
                    page.goto(web.url + "/plots")
                    page.wait_for_function(
                        "() => [...document.querySelectorAll('#s-plots svg.chart')]"
                        f".slice(0, 3).every(s => Number(s.dataset.points) >= {PLOT_POINTS})"
                    )
                    for name, path, ready in PAGES:
                        page.goto(web.url + path.replace("{run}", brief_run.id))
                        page.wait_for_selector(ready)
                        page.wait_for_selector("#conn.live")
                        page.screenshot(path=str(out / f"{name}.png"), full_page=True)
                        print(f"screenshots: {out / (name + '.png')}")
                    _counters(page, web, daemon.socket, out)
                    follower.join(60)
                    client.live_close(ref)
                    client.close()
                    page.goto(web.url + "/")
                    page.wait_for_selector("#conn.live")
                    daemon.stop()
                    page.wait_for_selector("#s-tree table.stale")
                    page.wait_for_selector("#conn.down")
                    page.screenshot(path=str(out / "disconnected.png"), full_page=True)
                    print(f"screenshots: {out / 'disconnected.png'}")
                    browser.close()
        finally:
            if web is not None:
                web.stop()
            daemon.stop()
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "screenshots")))
