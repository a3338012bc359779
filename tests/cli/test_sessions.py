"""`phloem chat` and `phloem session ...` against a daemon whose harness agent talks to a
local fake provider: one turn, an interactive loop, Ctrl-C, listing, showing, deleting."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.sessions.conftest import harness_config
from tests.helpers import PY, DaemonProc, cli_in as cli, running_daemon, wait_until
from tests.models.fake_provider import FakeProvider, Reply, chat_calls, chat_text, chat_tool_call


@pytest.fixture
def daemon(fake: FakeProvider, tmp_path: Path) -> Iterator[DaemonProc]:
    with running_daemon(harness_config(fake.base_url, tmp_path / "store")) as d:
        yield d


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def test_chat_turns_and_session_commands(
    daemon: DaemonProc, fake: FakeProvider, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("remember me\n")
    fake.add(
        chat_calls(chat_tool_call("read", json.dumps({"path": "notes.txt"}))),
        chat_text("It says remember me."),
        chat_text("Yes, still."),
        chat_text("Third."),
    )
    first = cli(daemon, tmp_path, "chat", "--new", "what is in notes.txt?")
    assert first.returncode == 0, first.stderr
    assert '> read {"path":"notes.txt"}' in first.stdout
    assert "< read ok" in first.stdout and "It says remember me." in first.stdout
    sid = first.stderr.split()[1]
    assert (tmp_path / ".phloem" / "chat-session").read_text().strip() == sid
    again = cli(daemon, tmp_path, "chat", "still?")  # continues the remembered session
    assert again.returncode == 0 and "Yes, still." in again.stdout
    looped = cli(daemon, tmp_path, "chat", "--session", sid, stdin="third?\n/exit\n")
    assert looped.returncode == 0 and "Third." in looped.stdout
    listed = cli(daemon, tmp_path, "session", "list", "--json")
    [summary] = json.loads(listed.stdout)
    assert summary["id"] == sid and summary["workdir"] == str(tmp_path.resolve())
    shown = cli(daemon, tmp_path, "session", "show", sid)
    assert f"session    {sid}" in shown.stdout and "events     8" in shown.stdout
    assert cli(daemon, tmp_path, "session", "delete", sid).stdout.strip() == "deleted"
    gone = cli(daemon, tmp_path, "session", "show", sid)
    assert gone.returncode == 1 and "[unknown_session]" in gone.stderr
    assert cli(daemon, tmp_path, "session", "show", sid, "--events", "0").returncode == 2


def test_ctrl_c_cancels_the_turn(daemon: DaemonProc, fake: FakeProvider, tmp_path: Path) -> None:
    fake.add(Reply(delay=60.0, body=b"{}"))
    proc = subprocess.Popen(
        [PY, "-m", "phloem", "chat", "--new", "hang", "--socket", str(daemon.socket)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    wait_until(lambda: len(fake.requests) == 1, timeout=30, what="the model call")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "cancelled" in err
    assert time.monotonic() - t0 < 10
    listed = cli(daemon, tmp_path, "session", "list", "--json")
    wait_until(
        lambda: (
            not json.loads(cli(daemon, tmp_path, "session", "list", "--json").stdout)[0]["busy"]
        ),
        timeout=10,
        what="the run to end",
    )
    assert listed.returncode == 0


def test_in_the_loop_ctrl_c_cancels_the_turn_and_a_second_one_exits(
    daemon: DaemonProc, fake: FakeProvider, tmp_path: Path
) -> None:
    fake.add(Reply(delay=60.0, body=b"{}"))
    proc = subprocess.Popen(
        [PY, "-m", "phloem", "chat", "--new", "--socket", str(daemon.socket)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write("hang\n")
    proc.stdin.flush()
    wait_until(lambda: len(fake.requests) == 1, timeout=30, what="the model call")
    proc.send_signal(signal.SIGINT)

    def idle() -> bool:
        listed = cli(daemon, tmp_path, "session", "list", "--json")
        return not json.loads(listed.stdout)[0]["busy"]

    wait_until(idle, timeout=10, what="the turn to be cancelled")
    proc.send_signal(signal.SIGINT)  # at the prompt (0) or still waiting for the cancel (1)
    _, err = proc.communicate(timeout=30)
    assert "cancelling the turn" in err
    assert proc.returncode in (0, 1)
