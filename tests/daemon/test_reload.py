"""SIGHUP re-reads the config: live changes applied, restart-only ones named, never dies;
and systemd's readiness protocol on a test NOTIFY_SOCKET."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.client.sync import Client
from phloem.daemon.notify import Notifier
from tests.helpers import DaemonProc, short_tmpdir, wait_until

pytestmark = pytest.mark.timeout(60)

BASE = """
[logging]
level = "info"

[agents.functions.echoer]
fn = "phloem.examples.supplier_risk:fetch_news"
input_keys = ["company"]
output_key = "news"
"""

CHANGED = """
[daemon]
max_connections = 17

[logging]
level = "debug"

[providers.local]
protocol = "openai-chat"
model = "m"
base_url = "http://127.0.0.1:9/v1"
chat_token_limit = "max_tokens"

[agents.functions.echoer]
fn = "phloem.examples.supplier_risk:fetch_news"
input_keys = ["company"]
output_key = "news"

[agents.llm.writer]
provider = "local"
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = short_tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _write(path: Path, text: str) -> None:
    """Replace the file whole (a reload must never read it half-written)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _datagrams(sock: socket.socket, want: str, limit: int = 20) -> list[str]:
    """Datagrams until one holding the line `want` (each datagram as text)."""
    seen: list[str] = []
    for _ in range(limit):
        text = sock.recv(4096).decode()
        seen.append(text)
        if want in text.splitlines():
            return seen
    raise AssertionError(f"no {want!r} in {seen}")


def test_sighup_applies_live_changes_names_restart_only_ones_and_survives(
    workdir: Path,
) -> None:
    config = workdir / "phloem.toml"
    config.write_text(BASE)
    daemon = DaemonProc(workdir / "run" / "phloem.sock", config).wait_ready()
    try:
        with Client.connect(daemon.socket) as client:
            assert [a.name for a in client.list_agents()] == ["echoer"]
            # at info nothing is logged at debug (a connection closing is a debug event)
            assert not any('"level": "debug"' in line for line in daemon.lines)
        _write(config, CHANGED)
        daemon.proc.send_signal(signal.SIGHUP)
        restart = daemon.wait_event("reload_needs_restart")
        assert restart["keys"] == ["daemon.max_connections"]
        done = daemon.wait_event("reload_done")
        assert done["log_level"] == "debug" and done["restart_needed"] == 1
        assert sorted(done["applied"]) == ["agents", "logging"]  # type: ignore[arg-type]
        with Client.connect(daemon.socket) as client:
            assert [a.name for a in client.list_agents()] == ["echoer", "writer"]
            assert client.ask("echo", "still here") == "still here"
        # the level is applied: a debug event (a connection closing) is now written
        wait_until(
            lambda: any('"connection_closed"' in line for line in daemon.lines),
            timeout=30,
            what="a debug line after the reload",
        )
        _write(config, "[logging\n")  # no longer TOML
        daemon.proc.send_signal(signal.SIGHUP)
        failed = daemon.wait_event("reload_failed")
        assert "phloem.toml" in str(failed["error"]) and failed["kind"] == "config_invalid"
        for _ in range(5):  # a burst of hangups: coalesced, never fatal
            daemon.proc.send_signal(signal.SIGHUP)
        _write(config, BASE)
        daemon.proc.send_signal(signal.SIGHUP)
        wait_until(
            lambda: any('"log_level":"info"' in line.replace(" ", "") for line in daemon.lines),
            timeout=30,
            what="a reload back to info",
        )
        with Client.connect(daemon.socket) as client:
            assert [a.name for a in client.list_agents()] == ["echoer"]
        assert daemon.proc.poll() is None
    finally:
        code = daemon.stop()
    assert code == 0, "".join(daemon.lines)


def test_the_daemon_speaks_the_notify_protocol(workdir: Path) -> None:
    config = workdir / "phloem.toml"
    config.write_text(BASE)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(workdir / "notify.sock"))
    listener.settimeout(30)
    env = {"NOTIFY_SOCKET": str(workdir / "notify.sock")}
    daemon = DaemonProc(workdir / "run" / "phloem.sock", config, env=env).wait_ready()
    try:
        ready = _datagrams(listener, "READY=1")[-1].splitlines()
        assert f"MAINPID={daemon.proc.pid}" in ready
        assert any(line.startswith("STATUS=serving on ") for line in ready)
        daemon.proc.send_signal(signal.SIGHUP)
        seen = _datagrams(listener, "READY=1")
        assert "RELOADING=1" in seen[0].splitlines()
        assert any(line.startswith("MONOTONIC_USEC=") for line in seen[0].splitlines())
        daemon.proc.send_signal(signal.SIGTERM)
        assert "STOPPING=1" in _datagrams(listener, "STOPPING=1")[-1].splitlines()
        assert daemon.proc.wait(30) == 0, "".join(daemon.lines)
    finally:
        daemon.stop()  # only if it is still running
        listener.close()


def test_notifier_abstract_address_and_no_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"phloem-test-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind("\0" + name)
    listener.settimeout(10)
    try:
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        notifier = Notifier()
        assert "NOTIFY_SOCKET" not in os.environ  # children cannot speak for the daemon
        assert notifier.status("line one\nline two " + "x" * 500)
        text = listener.recv(4096).decode()
        assert text.startswith("STATUS=line one line two ") and "\n" not in text
        assert len(text) == len("STATUS=") + 200
    finally:
        listener.close()
    assert not Notifier("").send(ready="1")  # no manager: a no-op
    dead = Notifier("/nonexistent/notify.sock")
    assert dead.enabled and not dead.ready("x")  # a failed send is dropped, never raised
