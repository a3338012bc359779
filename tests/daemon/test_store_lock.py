"""One session store, one daemon: a second `phloem daemon` on a held store (another
socket, the same state directory) refuses to start in one line naming the holder."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import phloem
from phloem.actors.sessions.durable import DurableSessionService
from phloem.base import storelock
from tests.helpers import PY, ROOT, DaemonProc, raises_kind

pytestmark = pytest.mark.timeout(90)


def _daemon_argv(config: Path, socket: Path) -> list[str]:
    return [PY, "-m", "phloem", "daemon", "--config", str(config), "--socket", str(socket)]


def test_a_second_daemon_on_a_held_store_refuses_to_start_naming_the_holder(
    tmp_short: Path,
) -> None:
    config = tmp_short / "phloem.toml"
    config.write_text("")
    env = {"XDG_STATE_HOME": str(tmp_short / "state")}
    first = DaemonProc(tmp_short / "a" / "d.sock", config, env=env).wait_ready()
    try:
        second = subprocess.run(
            _daemon_argv(config, tmp_short / "b" / "d.sock"),
            check=False,
            cwd=ROOT,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        store = tmp_short / "state" / "phloem" / "sessions"
        assert second.returncode == 1, second.stderr
        assert second.stderr.splitlines() == [
            f"phloem: the session store {store} is held by the phloem daemon pid "
            f"{first.proc.pid} on socket {first.socket} [session_store_locked]"
        ]
        assert not (tmp_short / "b" / "d.sock").exists()
        listed = subprocess.run(  # the holder's sessions work
            [PY, "-m", "phloem", "session", "list", "--socket", str(first.socket)],
            check=False,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
    finally:
        assert first.stop() == 0, "".join(first.lines)
    again = DaemonProc(tmp_short / "b" / "d.sock", config, env=env).wait_ready()
    assert again.stop() == 0, "".join(again.lines)


def test_a_daemon_without_the_sessions_service_holds_no_store(tmp_short: Path) -> None:
    configs = []
    for name in ("a", "b"):  # each its own journal dir: those are held per daemon too
        config = tmp_short / f"{name}.toml"
        journals = tmp_short / f"journals-{name}"
        config.write_text(
            f'[services]\ndisabled = ["sessions"]\n[planning]\njournal_dir = "{journals}"\n'
        )
        configs.append(config)
    env = {"XDG_STATE_HOME": str(tmp_short / "state")}
    first = DaemonProc(tmp_short / "a" / "d.sock", configs[0], env=env).wait_ready()
    try:
        second = DaemonProc(tmp_short / "b" / "d.sock", configs[1], env=env).wait_ready()
        assert second.stop() == 0
    finally:
        assert first.stop() == 0
    assert not (tmp_short / "state").exists()


def test_a_reserved_store_is_claimed_once_by_its_own_process(tmp_path: Path) -> None:
    reservation = storelock.reserve(tmp_path, "/run/x.sock")
    try:
        store = DurableSessionService(tmp_path)  # the daemon's own sessions service
        assert raises_kind(DurableSessionService, tmp_path) == "session_store_locked"
        with pytest.raises(phloem.PhloemError, match=f"pid {os.getpid()} on socket /run/x.sock"):
            DurableSessionService(tmp_path)
        store.close()
        DurableSessionService(tmp_path).close()  # claimed again after the first closed
        assert raises_kind(storelock.reserve, tmp_path, "/run/y.sock") == "session_store_locked"
    finally:
        reservation.release()
    reservation.release()  # idempotent
    DurableSessionService(tmp_path).close()  # and free for anyone once released


def test_a_lock_file_naming_no_one_is_reported_as_another_process(tmp_path: Path) -> None:
    held = storelock.claim(tmp_path)
    try:
        (tmp_path / storelock.LOCK_NAME).write_bytes(b"x" * (storelock.MAX_HOLDER_RECORD_BYTES + 1))
        with pytest.raises(phloem.PhloemError, match="is held by another process"):
            storelock.claim(tmp_path)
    finally:
        held.release()


def test_a_holder_record_of_exactly_the_limit_is_read_one_byte_more_is_not(
    tmp_path: Path,
) -> None:
    held = storelock.claim(tmp_path)
    try:
        record = b'{"pid": 4242, "socket": "/s"}'
        exact = b" " * (storelock.MAX_HOLDER_RECORD_BYTES - len(record)) + record
        (tmp_path / storelock.LOCK_NAME).write_bytes(exact)
        with pytest.raises(phloem.PhloemError, match=r"daemon pid 4242 on socket /s$"):
            storelock.claim(tmp_path)
        (tmp_path / storelock.LOCK_NAME).write_bytes(b" " + exact)  # the closing brace cut
        with pytest.raises(phloem.PhloemError, match=r"is held by another process$"):
            storelock.claim(tmp_path)
    finally:
        held.release()


def test_two_daemons_never_share_one_journal_dir(tmp_short: Path) -> None:
    """Two daemons with their own session stores but one `[planning] journal_dir`: the
    second refuses to start (`run_journals_locked`, naming the holder) — it would resume
    the first one's durable runs beside it — and starts once the first has stopped."""
    journals = tmp_short / "journals"
    config = tmp_short / "phloem.toml"
    config.write_text(f'[planning]\njournal_dir = "{journals}"\n')
    first = DaemonProc(
        tmp_short / "a" / "d.sock", config, env={"XDG_STATE_HOME": str(tmp_short / "s1")}
    ).wait_ready()
    env = {"XDG_STATE_HOME": str(tmp_short / "s2")}
    try:
        second = subprocess.run(
            _daemon_argv(config, tmp_short / "b" / "d.sock"),
            check=False,
            cwd=ROOT,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1, second.stderr
        assert second.stderr.splitlines() == [
            f"phloem: the durable run journal directory {journals} is held by the phloem "
            f"daemon pid {first.proc.pid} on socket {first.socket} [run_journals_locked]"
        ]
        assert not (tmp_short / "b" / "d.sock").exists()
    finally:
        assert first.stop() == 0, "".join(first.lines)
    again = DaemonProc(tmp_short / "b" / "d.sock", config, env=env).wait_ready()
    assert again.stop() == 0, "".join(again.lines)


def test_the_journal_lock_is_the_store_lock(tmp_path: Path) -> None:
    held = storelock.reserve(tmp_path, "/run/x.sock", store=storelock.RUN_JOURNALS)
    try:
        assert raises_kind(storelock.reserve, tmp_path, "/run/y.sock") == "session_store_locked"
        refused = raises_kind(
            storelock.reserve, tmp_path, "/run/y.sock", store=storelock.RUN_JOURNALS
        )
        assert refused == "run_journals_locked"
    finally:
        held.release()
    storelock.reserve(tmp_path, "/run/y.sock", store=storelock.RUN_JOURNALS).release()
