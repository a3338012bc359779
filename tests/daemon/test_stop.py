"""`phloem stop` tells the truth: it reports "stopped" only once the daemon's process has
exited, and exits 1 saying so when it did not within `--timeout`; a daemon whose stderr
reader has gone away still stops (logging never raises into the stop path)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.daemon.fixture_services import SLOW_STOP_S
from tests.helpers import FIXTURE_CONFIG, PY, ROOT, DaemonProc, pids_alive, run_cli

pytestmark = pytest.mark.timeout(60)

SLOW_CONFIG = FIXTURE_CONFIG + 'slow = "tests.daemon.fixture_services:SlowStopService"\n'


def test_stop_waits_for_the_daemon_process_to_exit(tmp_short: Path) -> None:
    config = tmp_short / "slow.toml"
    config.write_text(SLOW_CONFIG)
    daemon = DaemonProc(tmp_short / "d.sock", config).wait_ready()
    try:
        started = time.monotonic()
        result = run_cli("stop", "--socket", str(daemon.socket), "--timeout", "20")
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"phloem daemon (pid {daemon.proc.pid}) stopped\n"
        assert time.monotonic() - started >= SLOW_STOP_S
        assert daemon.proc.poll() == 0, "`stop` said stopped while the daemon was still running"
        assert not daemon.socket.exists()
    finally:
        daemon.stop()


def test_stop_exits_1_when_the_daemon_does_not_exit_within_the_timeout(tmp_short: Path) -> None:
    config = tmp_short / "slow.toml"
    config.write_text(SLOW_CONFIG)
    daemon = DaemonProc(tmp_short / "d.sock", config).wait_ready()
    try:
        result = run_cli("stop", "--socket", str(daemon.socket), "--timeout", "0.3", "--json")
        assert result.returncode == 1, result.stdout
        pid = daemon.proc.pid
        assert result.stderr == (
            f"phloem: the daemon (pid {pid}) did not exit within 0.3 s of being asked to stop"
            " [timeout]\n"
        )
        assert json.loads(result.stdout)["error"]["kind"] == "timeout"
        assert daemon.proc.wait(20) == 0  # it was asked, and does stop, just later
    finally:
        daemon.stop()


def test_stop_refuses_a_bad_timeout_as_a_usage_error(tmp_short: Path) -> None:
    result = run_cli("stop", "--socket", str(tmp_short / "none.sock"), "--timeout", "-1")
    assert result.returncode == 2
    assert result.stderr.startswith("phloem stop: timeout must be")


def test_a_daemon_whose_stderr_reader_is_gone_still_stops(tmp_short: Path) -> None:
    config = tmp_short / "c.toml"
    config.write_text(FIXTURE_CONFIG)
    sock = tmp_short / "d.sock"
    proc = subprocess.Popen(
        [PY, "-m", "phloem", "daemon", "--config", str(config), "--socket", str(sock)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if '"daemon_ready"' in line:
                break
        else:
            pytest.fail("the daemon exited before it was ready")
        proc.stderr.close()  # the log reader goes away: every later write gets EPIPE
        result = run_cli("stop", "--socket", str(sock), "--timeout", "15")
        assert result.returncode == 0, result.stderr
        assert proc.wait(5) == 0
        assert not pids_alive(proc.pid) and not sock.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_stop_json_reports_the_pid(fixture_config: Path) -> None:
    daemon = DaemonProc(fixture_config.parent / "s.sock", fixture_config).wait_ready()
    try:
        result = run_cli("stop", "--socket", str(daemon.socket), "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"stopped": True, "pid": daemon.proc.pid}
        assert daemon.proc.poll() == 0
    finally:
        daemon.stop()
