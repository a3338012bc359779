"""`phloem runs [--follow] [--json]` over a real daemon's socket: a 5 ms run is listed with
its events and outcome, and `--follow` prints each change as it happens."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator

import msgspec
import pytest

import phloem
from phloem.protocols.runs import RunSummary
from tests.helpers import PY, ROOT, DaemonProc, run_cli, running_daemon

pytestmark = pytest.mark.timeout(120)

CONFIG = """
[agents.functions.quick]
fn = "tests.actors.runs_fixtures:quick"
input_keys = ["topic"]
output_key = "answer"
"""
LINE_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(CONFIG) as d:
        yield d


def quick_run(daemon: DaemonProc) -> None:
    with phloem.Client.connect(daemon.socket) as client:
        assert client.run_agent("quick", state={"topic": "tea"}).ok


def test_phloem_runs_lists_a_five_ms_run_with_its_events_and_outcome(daemon: DaemonProc) -> None:
    quick_run(daemon)
    done = run_cli("runs", "--json", "--socket", str(daemon.socket))
    assert done.returncode == 0, done.stderr
    runs = msgspec.json.decode(done.stdout, type=list[RunSummary])
    mine = [r for r in runs if r.name == "quick"][-1]
    assert mine.kind == "agent" and mine.outcome == "done" and mine.error is None
    assert mine.ended_at is not None and mine.owner.startswith("connection pid=")
    assert mine.event_count >= 1 and mine.events[0].kind == "agent_event"
    assert mine.events[0].detail["author"] == "quick"
    assert "tea" not in done.stdout  # content-free: not the input, not the answer
    plain = run_cli("runs", "--socket", str(daemon.socket))
    assert plain.returncode == 0, plain.stderr
    [line] = [x for x in plain.stdout.splitlines() if x.startswith(f"{mine.id} ")]
    assert line.split()[:4] == [mine.id, "agent", "quick", "done"] and " connection " in line
    assert plain.stdout.splitlines()[0].split() == [
        *("ID", "KIND", "NAME", "OUTCOME", "STARTED", "MS", "OWNER", "EVENTS")
    ]
    index = plain.stdout.splitlines().index(line)
    assert plain.stdout.splitlines()[index + 1].strip().startswith("#1 ")
    assert "agent_event author=quick" in plain.stdout


def test_phloem_runs_follow_prints_each_change_as_it_happens(daemon: DaemonProc) -> None:
    follow = subprocess.Popen(
        [PY, "-m", "phloem", "runs", "--follow", "--json", "--socket", str(daemon.socket)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert follow.stdout is not None
    out = follow.stdout
    threading.Thread(target=lambda: [lines.put(x) for x in out], daemon=True).start()
    try:
        before = json.loads(lines.get(timeout=LINE_TIMEOUT_S))  # the record, first
        assert isinstance(before, list)
        quick_run(daemon)
        began = json.loads(lines.get(timeout=LINE_TIMEOUT_S))
        assert began["type"] == "began" and began["run"]["name"] == "quick"
        rid = began["run"]["id"]
        seen = []
        while True:
            update = json.loads(lines.get(timeout=LINE_TIMEOUT_S))
            seen.append(update)
            if update["type"] == "finished":
                break
        assert [u["id"] for u in seen] == [rid] * len(seen)
        assert seen[0]["type"] == "noted" and seen[0]["note"]["kind"] == "agent_event"
        assert seen[-1]["outcome"] == "done"
    finally:
        follow.send_signal(signal.SIGINT)
        code = follow.wait(30)
    assert code == 130, follow.stderr.read() if follow.stderr else ""
