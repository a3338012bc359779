"""Fixtures: a real daemon process on a temporary socket, and configs for it."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
READY_TIMEOUT_S = 20.0

FIXTURE_CONFIG = """
[services.extra]
holder = "tests.daemon.fixture_services:HolderService"
counter = "tests.daemon.fixture_services:counter_factory"
"""


def short_tmpdir() -> Path:
    """A short temp dir (socket paths are limited to 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="phl"))


class DaemonProc:
    """A `phloem daemon` subprocess; `lines` collects its JSON log events."""

    def __init__(self, socket_path: Path, config: Path, extra_args: list[str] | None = None):
        self.socket = socket_path
        self.config = config
        self.events: queue.Queue[dict[str, object]] = queue.Queue()
        self.lines: list[str] = []
        args = [PY, "-m", "phloem", "daemon", "--config", str(config), "--socket", str(socket_path)]
        self.proc = subprocess.Popen(
            args + (extra_args or []),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "raw", "line": line}
            self.events.put(event)
        self.events.put({"event": "eof"})

    def wait_event(self, name: str, timeout: float = READY_TIMEOUT_S) -> dict[str, object]:
        """Wait for a log event; fails the test with the daemon's output if it exits."""
        while True:
            try:
                event = self.events.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no {name!r} event within {timeout}s:\n{''.join(self.lines)}")
            if event.get("event") == name:
                return event
            if event.get("event") == "eof":
                pytest.fail(f"daemon exited before {name!r}:\n{''.join(self.lines)}")

    def wait_ready(self) -> DaemonProc:
        self.wait_event("daemon_ready")
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            pytest.fail(f"daemon did not stop on {sig}:\n{''.join(self.lines)}")


def run_cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "phloem", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def tmp_short() -> Iterator[Path]:
    d = short_tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fixture_config(tmp_short: Path) -> Path:
    path = tmp_short / "phloem.toml"
    path.write_text(FIXTURE_CONFIG)
    return path


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[DaemonProc]:
    """One daemon (with the fixture services) for the tests of a module."""
    d = short_tmpdir()
    config = d / "phloem.toml"
    config.write_text(FIXTURE_CONFIG)
    daemon = DaemonProc(d / "run" / "phloem.sock", config).wait_ready()
    yield daemon
    daemon.stop()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_phloem_socket_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PHLOEM_SOCKET", raising=False)


def pids_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
