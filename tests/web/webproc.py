"""`WebProc`: a `phloem web` subprocess for the tests, and the browser they drive.

The browser is Debian's `chromium` (`/usr/bin/chromium`, installed by `make test` where
the machine allows) driven by Playwright with `executable_path`: nothing is downloaded
at run time, and the browser tests skip, saying why, only when no browser is installed.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PY, ROOT

CHROMIUM = Path(os.environ.get("PHLOEM_CHROMIUM", "/usr/bin/chromium"))
START_TIMEOUT_S = 60.0
BROWSER_TIMEOUT_MS = 60_000  # generous: the machine may be heavily loaded

SLOW_AGENT_CONFIG = """
[agents.functions.stepA]
fn = "tests.web.fixtures:step_a"
input_keys = ["topic"]
output_key = "a"
isolate = true

[agents.functions.stepB]
fn = "tests.web.fixtures:step_b"
input_keys = ["a"]
output_key = "b"
isolate = true

[agents.planners.slowPair]
planner = "sequential"
sub_agents = ["stepA", "stepB"]
"""
PLANNING_CONFIG = """
[planning.planners]
scripted = "tests.actors.planning.adapters:ScriptedPlanner"
[planning.executors]
scripted = "tests.actors.planning.adapters:ScriptedExecutor"
"""
WEB_CONFIG = (
    """
[services.extra]
holder = "tests.daemon.fixture_services:HolderService"
"""
    + SLOW_AGENT_CONFIG
    + PLANNING_CONFIG
)
# A planning run whose one step sleeps until it is cancelled (the test ends it).
SLEEPING_PLAN = {"name": "scripted", "target": {"steps": [{"op": "sleep", "s": 600}]}}


class WebProc:
    """`phloem web --socket S --listen L ...`; `url` once it serves."""

    def __init__(self, socket: Path, *args: str, env: dict[str, str] | None = None) -> None:
        cmd = [PY, "-m", "phloem", "web", "--socket", str(socket), *args]
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        out = self.proc.stdout
        threading.Thread(target=lambda: [lines.put(x) for x in out], daemon=True).start()
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            self.stop()
            pytest.fail(f"phloem web did not start: {self.stderr()}")
        assert line.startswith("phloem web: serving "), line
        self.url = line.split()[-1].rstrip("/")
        self.port = int(self.url.rsplit(":", 1)[1])

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def stats(self, headers: dict[str, str] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(self.url + "/api/stats", headers=headers or {})
        with urllib.request.urlopen(request, timeout=30) as reply:
            data: dict[str, Any] = json.loads(reply.read())
            return data

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)


@contextmanager
def running_web(socket: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[WebProc]:
    web = WebProc(socket, *args, env=env)
    try:
        yield web
    finally:
        code = web.stop()
        assert code == 0, f"phloem web exited {code}: {web.stderr()}"


def browser_or_skip() -> Any:
    """A started Playwright with Chromium launched, or a skip saying why there is none."""
    if not CHROMIUM.exists():
        pytest.skip(f"no browser: {CHROMIUM} is not installed (make test installs chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no browser driver: the playwright package is not installed (make install)")
    manager = sync_playwright().start()
    browser = manager.chromium.launch(
        executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
    )
    return manager, browser


UNTRUSTED_TEXT = '<script>alert("x")</script><img src=x onerror=alert(1)>'
SEEDED_SESSION = "s-compacted"


def seed_sessions(directory: Path) -> str:
    """A session store with one session whose compaction elided an old tool result and
    dropped an old turn (its sidecar, as the harness writes it) and whose transcript holds
    untrusted markup; made before a daemon opens the store. Its id."""
    from phloem.actors.sessions.compaction import SIDECAR_KIND
    from phloem.actors.sessions.durable import DurableSessionService
    from phloem.agents.events import Event
    from phloem.protocols.compaction import State
    from phloem.protocols.content import Content, Part
    from phloem.protocols.tokens import digest, wire_content

    store = DurableSessionService(directory, sync=False)
    session = store.create_session(
        "phloem", "user", session_id=SEEDED_SESSION, meta={"agent": "coder", "workdir": "/w"}
    )
    call = Part.from_function_call("read", {"path": "notes.txt"}, id="call_1")
    answer = Part.from_function_response("read", {"output": "x" * 300}, id="call_1")
    old_turn = [Content.user("an old question"), Content.model("an old answer")]
    contents = [
        Content.user("read notes.txt"),
        Content(role="model", parts=(call,)),
        Content(role="user", parts=(answer,)),
        Content.model("notes.txt is 300 x's"),
        *old_turn,
        Content.user(UNTRUSTED_TEXT),
        Content.model("that was markup, shown as text"),
    ]
    for content in contents:
        store.append_event(
            session, Event(author="user" if content.role == "user" else "coder", content=content)
        )
    state = State(
        elided_responses=["id:call_1"], dropped_turns=[digest([wire_content(c) for c in old_turn])]
    )
    store.save_sidecar(session.id, SIDECAR_KIND, state.to_json())
    store.close()
    return session.id
