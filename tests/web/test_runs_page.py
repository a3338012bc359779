"""The Runs and Sessions pages of a real `phloem web` over a real daemon, read over HTTP
(no browser needed): a planning run's `plan_accepted` and `step_started` show while it
runs and its outcome once it ended; a 5 ms agent run shows with its events and outcome;
the sessions of the store are listed with their agent, workdir, events and state; the
Agents page lists the catalogue."""

from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from html import escape as html_escape
from pathlib import Path

import pytest

import phloem
from phloem.actors.sessions.durable import DurableSessionService
from phloem.agents.events import Event
from phloem.web.sessionview import MAX_TRANSCRIPT_EVENTS
from tests.helpers import DaemonProc, running_daemon, short_tmpdir, wait_until
from tests.web.webproc import PLANNING_CONFIG, SLEEPING_PLAN, running_web

pytestmark = pytest.mark.timeout(180)

PAGE_TIMEOUT_S = 60.0
UNTRUSTED = '<script>alert("x")</script><img src=x onerror=alert(1)>'
AGENTS = """
[agents.functions.quick]
fn = "tests.actors.runs_fixtures:quick"
input_keys = ["topic"]
output_key = "answer"
"""


@pytest.fixture(scope="module")
def store() -> Iterator[Path]:
    """A session store with one session of two events, made before the daemon opens it."""
    root = short_tmpdir()
    sessions = DurableSessionService(root / "sessions", sync=False)
    session = sessions.create_session(
        "phloem", "user", session_id="s-web", meta={"agent": "coder", "workdir": "/w"}
    )
    for text in ("hello", "a private answer", UNTRUSTED):
        sessions.append_event(session, Event.from_text("coder", text))
    for name, count in (("s-full", MAX_TRANSCRIPT_EVENTS), ("s-over", MAX_TRANSCRIPT_EVENTS + 1)):
        long = sessions.create_session("phloem", "user", session_id=name, meta={"agent": "coder"})
        for i in range(count):
            sessions.append_event(long, Event.from_text("coder", f"line {i}"))
    sessions.close()
    yield root / "sessions"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(store: Path) -> Iterator[DaemonProc]:
    with running_daemon(f'[sessions]\ndir = "{store}"\n' + AGENTS + PLANNING_CONFIG) as d:
        yield d


@pytest.fixture(scope="module")
def web(daemon: DaemonProc) -> Iterator[str]:
    with running_web(daemon.socket, "--listen", "127.0.0.1:0") as w:
        yield w.url


def page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as reply:
        text: str = reply.read().decode()
        return text


def article(html: str, run_id: str) -> str:
    """The `<article>` of run `run_id` on a Runs page ("" when it is not there)."""
    found = re.search(rf'<article [^>]*data-run="{re.escape(run_id)}".*?</article>', html)
    return found.group(0) if found else ""


def test_a_planning_runs_events_show_while_it_runs(daemon: DaemonProc, web: str) -> None:
    with phloem.Client.connect(daemon.socket) as client:
        started = client.start_planning_run(SLEEPING_PLAN, "scripted", {"task": "web"})
        [mine] = [r for r in client.list_runs() if r.kind == "planning" and r.outcome is None]

        def shows_its_step() -> bool:
            shown = article(page(web + "/runs"), mine.id)
            return 'data-state="running"' in shown and 'data-kind="step_started"' in shown

        wait_until(shows_its_step, PAGE_TIMEOUT_S, "the step, while the run runs")
        shown = article(page(web + "/runs"), mine.id)
        assert '<li data-kind="plan_accepted">' in shown and "step_id=s1" in shown
        assert "sleep" not in shown  # the step's action is content: not shown
        assert client.cancel_planning(started.ref) is True

        def shows_its_end() -> bool:
            return 'data-state="cancelled"' in article(page(web + "/runs"), mine.id)

        wait_until(shows_its_end, PAGE_TIMEOUT_S, "the outcome")
        assert client.await_planning(started.ref, 30).status == "cancelled"
    ended = article(page(web + "/runs"), mine.id)
    assert '<li data-kind="terminal">' in ended and "status=cancelled" in ended


def test_a_five_ms_run_shows_with_its_events_and_outcome(daemon: DaemonProc, web: str) -> None:
    with phloem.Client.connect(daemon.socket) as client:
        assert client.run_agent("quick", state={"topic": "tea"}).ok
        mine = [r for r in client.list_runs() if r.name == "quick"][-1]

    def shows_it() -> bool:
        return 'data-state="done"' in article(page(web + "/runs"), mine.id)

    wait_until(shows_it, PAGE_TIMEOUT_S, "the quick run")
    shown = article(page(web + "/runs"), mine.id)
    assert 'data-kind="agent_event"' in shown and "author=quick" in shown
    assert "tea" not in shown and "quick(3)" not in shown


def test_the_sessions_page_lists_the_sessions(web: str) -> None:
    def lists_it() -> bool:
        return 'data-session="s-web"' in page(web + "/sessions")

    wait_until(lists_it, PAGE_TIMEOUT_S, "the session")
    html = page(web + "/sessions")
    assert (
        '<tr data-session="s-web" data-busy="no"><td><a href="/sessions/s-web">s-web</a></td>'
        "<td>coder</td>" in html
    )
    assert "<td>/w</td><td>3</td><td>idle</td>" in html  # three events, no turn running
    assert "private answer" not in html and "s-web.jsonl" not in html
    assert '<a href="/sessions" class=here>Sessions</a>' in html


def test_a_sessions_transcript_is_shown_read_only_and_escaped(web: str) -> None:
    html = page(web + "/sessions/s-web")
    assert '<div class=session data-session="s-web">' in html
    texts = re.findall(r"<div class=text>(.*?)</div>", html)
    assert texts[:2] == ["hello", "a private answer"]
    assert texts[2] == html_escape(UNTRUSTED)  # untrusted text: escaped, never markup
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "compaction:" not in html  # no decisions kept: nothing marked
    assert '<a href="/sessions" class=here>Sessions</a>' in html
    for path, code in (("/sessions/nobody", 404), ("/sessions/..%2Fetc", 404)):
        with pytest.raises(urllib.error.HTTPError) as err:
            page(web + path)
        assert err.value.code == code, path


def test_a_transcript_page_reads_at_most_its_last_events(web: str) -> None:
    full = page(web + "/sessions/s-full")
    assert full.count('<li class="event ') == MAX_TRANSCRIPT_EVENTS and "older events" not in full
    over = page(web + "/sessions/s-over")
    assert over.count('<li class="event ') == MAX_TRANSCRIPT_EVENTS
    assert "1 older events not shown" in over and ">line 0<" not in over and ">line 1<" in over


def test_the_agents_page_lists_the_catalogue(web: str) -> None:
    def lists_it() -> bool:
        return 'data-agent="quick"' in page(web + "/agents")

    wait_until(lists_it, PAGE_TIMEOUT_S, "the agent")
    html = page(web + "/agents")
    assert '<tr data-agent="quick"><td>quick</td><td>FunctionAgent</td>' in html
    assert '<a href="/agents" class=here>Agents</a>' in html
