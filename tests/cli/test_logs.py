"""`phloem logs [PATH] [--follow] [--since DURATION]` as a user types it, against a real
daemon: each line is attributed to the child that logged it (in the kept line and in the
JSON line on stderr), a PATH picks that child's lines and those below it, `--since`
leaves older lines out, `--follow` prints new lines until Ctrl-C (exit 130, no
traceback) or until the daemon goes away (one line, exit 1)."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import msgspec
import pytest

from phloem.cli.args import MAX_DURATION_S, duration_arg
from phloem.cli.commands import UsageError
from phloem.protocols.logs import LogLine
from tests.helpers import PY, ROOT, DaemonProc, run_cli, running_daemon, short_tmpdir

pytestmark = pytest.mark.timeout(240)

CONFIG = """
[services.extra]
chatty = "tests.cli.control_fixtures:ChattyService"
pair = "tests.cli.control_fixtures:pair_factory"
"""
LINE_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(CONFIG) as d:
        yield d


def cli(daemon: DaemonProc, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--socket", str(daemon.socket), timeout=120)


def say(daemon: DaemonProc, path: str, text: str) -> None:
    done = cli(daemon, "send", path, json.dumps({"say": text}))
    assert done.returncode == 0, done.stderr


def kept(daemon: DaemonProc, *args: str) -> list[LogLine]:
    done = cli(daemon, "logs", *args, "--json")
    assert done.returncode == 0, done.stderr
    return [msgspec.json.decode(line, type=LogLine) for line in done.stdout.splitlines()]


def said(lines: list[LogLine]) -> list[tuple[str, str]]:
    return [(x.actor, json.loads(x.line)["text"]) for x in lines if x.event == "chatty_said"]


def test_each_line_is_kept_for_the_child_that_logged_it(daemon: DaemonProc) -> None:
    say(daemon, "chatty", "from-chatty")
    say(daemon, "pair/second", "from-second")
    assert ("chatty", "from-chatty") in said(kept(daemon))
    assert said(kept(daemon, "chatty")) == [("chatty", "from-chatty")]
    assert said(kept(daemon, "pair")) == [("pair/second", "from-second")]  # and below it
    assert said(kept(daemon, "phloem/pair/second")) == [("pair/second", "from-second")]
    assert said(kept(daemon, "pair/first")) == []
    stderr = [json.loads(x) for x in daemon.lines if '"chatty_said"' in x]
    assert {(e["actor_path"], e["text"]) for e in stderr} >= {
        ("chatty", "from-chatty"),
        ("pair/second", "from-second"),
    }
    plain = cli(daemon, "logs", "chatty").stdout.splitlines()
    [line] = [x for x in plain if " chatty_said " in x]
    assert line.split()[1:4] == ["info", "chatty", "chatty_said"] and "text=from-chatty" in line


def test_since_leaves_older_lines_out(daemon: DaemonProc) -> None:
    say(daemon, "pair/first", "early")
    time.sleep(3.0)  # the line must be older than the --since below, however slow the CLI
    assert ("pair/first", "early") not in said(kept(daemon, "pair/first", "--since", "1s"))
    assert ("pair/first", "early") in said(kept(daemon, "pair/first", "--since", "1h"))
    for bad in ("5x", "-1s", "0", "400d"):
        done = cli(daemon, "logs", "--since", bad)
        assert done.returncode == 2 and "--since" in done.stderr, (bad, done.stderr)


class Follower:
    """`phloem logs PATH --follow --json` in the background; its lines on a queue."""

    def __init__(self, daemon: DaemonProc, *args: str) -> None:
        self.proc = subprocess.Popen(
            [
                PY,
                "-m",
                "phloem",
                "logs",
                *args,
                "--follow",
                "--json",
                "--socket",
                str(daemon.socket),
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def said_until(self, text: str) -> list[tuple[str, str]]:
        """The `chatty_said` lines read up to and with the one saying `text`."""
        seen: list[tuple[str, str]] = []
        while not seen or seen[-1][1] != text:
            line = msgspec.json.decode(self.lines.get(timeout=LINE_TIMEOUT_S), type=LogLine)
            if line.event == "chatty_said":
                seen.append((line.actor, json.loads(line.line)["text"]))
        return seen


def test_follow_prints_new_lines_until_ctrl_c(daemon: DaemonProc) -> None:
    say(daemon, "chatty", "before-follow")
    follower = Follower(daemon, "chatty")
    try:
        kept_first = follower.said_until("before-follow")  # the kept ones first
        say(daemon, "pair/first", "not-for-this-follower")
        say(daemon, "chatty", "follow-1")
        say(daemon, "chatty", "follow-2")
        later = follower.said_until("follow-2")
        assert later == [("chatty", "follow-1"), ("chatty", "follow-2")]  # once each, in order
        assert {actor for actor, _ in kept_first} == {"chatty"}
    finally:
        follower.proc.send_signal(signal.SIGINT)
        _, err = follower.proc.communicate(timeout=60)
    assert follower.proc.returncode == 130
    assert "Traceback" not in err and err.strip() == ""


def test_follow_ends_with_one_line_and_exit_1_when_the_daemon_goes_away() -> None:
    d = short_tmpdir()
    config = d / "phloem.toml"
    config.write_text(CONFIG)
    daemon = DaemonProc(d / "run" / "phloem.sock", config).wait_ready()
    try:
        follower = Follower(daemon)
        say(daemon, "chatty", "last-words")
        assert follower.said_until("last-words") == [("chatty", "last-words")]
        assert daemon.stop() == 0
        _, err = follower.proc.communicate(timeout=60)
    finally:
        daemon.stop()
        shutil.rmtree(d, ignore_errors=True)
    assert follower.proc.returncode == 1
    [line] = err.splitlines()
    assert line.startswith("phloem: ") and "Traceback" not in err


def test_durations_at_the_limit_and_one_over() -> None:
    assert duration_arg("since", "90") == 90.0
    assert [duration_arg("since", t) for t in ("30s", "5m", "2h", "1.5d")] == [
        30.0,
        300.0,
        7_200.0,
        129_600.0,
    ]
    assert duration_arg("since", f"{MAX_DURATION_S:.0f}") == MAX_DURATION_S
    for bad in (f"{MAX_DURATION_S + 1:.0f}", "0s", "", "m", "1 h", "1w"):
        with pytest.raises(UsageError):
            duration_arg("since", bad)
