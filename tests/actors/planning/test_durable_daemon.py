"""Durable runs through a real daemon: reattach from a new connection after a kill -9,
cancel a resumed run, `phloem plan attach` and `phloem runs --durable`, and a client of
another uid refused (a real other uid — `nobody` — when the tests run as root)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import phloem
from phloem.protocols.errors import PhloemError
from tests.actors.planning.durable_adapters import value_of
from tests.actors.planning.test_durable_crash import durable_config
from tests.helpers import ROOT, DaemonProc, raises_kind, short_tmpdir, wait_until

pytestmark = pytest.mark.timeout(120)

SLOW = {"callback_timeout_ms": 120_000}


class Setup:
    def __init__(self, d: Path, extra: str = "") -> None:
        self.d = d
        self.log = d / "executions.log"
        self.config = d / "phloem.toml"
        self.config.write_text(durable_config(d / "journals") + extra)
        self.socket = d / "run" / "phloem.sock"
        self.env = {"XDG_STATE_HOME": str(d / "state")}

    def daemon(self) -> DaemonProc:
        return DaemonProc(self.socket, self.config, env=self.env).wait_ready()

    def executions(self) -> list[str]:
        if not self.log.exists():
            return []
        return [" ".join(x.split()[:2]) for x in self.log.read_text().splitlines()]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "phloem", *args, "--socket", str(self.socket)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
def setup() -> Iterator[Setup]:
    d = short_tmpdir()
    try:
        yield Setup(d, "[daemon]\nallowed_uids = [65534]\n" if os.getuid() == 0 else "")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def start_slow(setup: Setup, key: str) -> str:
    goal = {"key": key, "steps": 3, "log": str(setup.log), "slow": 2, "slow_s": 60}
    with phloem.Client.connect(setup.socket) as client:
        return client.start_planning_run("d", "d", goal, {}, SLOW).run_id


def test_reattach_after_a_kill_from_a_new_connection_then_cancel(setup: Setup) -> None:
    daemon = setup.daemon()
    run_id = start_slow(setup, "r")
    wait_until(lambda: setup.executions() == ["r s1", "r s2"], 60, "s2 started")
    daemon.stop(signal.SIGKILL)
    daemon = setup.daemon()
    try:
        # s2 was in flight and is idempotent: the resumed run runs it again
        wait_until(lambda: setup.executions() == ["r s1", "r s2", "r s2"], 60, "s2 again")
        listed = setup.cli("runs", "--durable", "--json")
        assert listed.returncode == 0, listed.stderr
        [info] = json.loads(listed.stdout)
        assert info["id"] == run_id and info["live"] and info["outcome"] is None
        with phloem.Client.connect(setup.socket) as client:
            started = client.attach_planning(run_id)
            assert started.run_id == run_id and started.ref.startswith("plan_")
            assert client.cancel_planning(started.ref, "enough")
            result = client.await_planning(started.ref, timeout=60)
        assert result.status == "cancelled"
        assert result.error is not None and result.error.reason == "enough"
        assert setup.executions() == ["r s1", "r s2", "r s2"]  # s3 never ran
        table = setup.cli("runs", "--durable")
        assert run_id in table.stdout and "cancelled" in table.stdout
    finally:
        assert daemon.stop() == 0, "".join(daemon.lines)


def test_plan_attach_follows_a_resumed_run_to_its_result(setup: Setup) -> None:
    daemon = setup.daemon()
    goal = {"key": "c", "steps": 3, "log": str(setup.log), "slow": 2, "slow_s": 2}
    with phloem.Client.connect(setup.socket) as client:
        run_id = client.start_planning_run("d", "d", goal, {}, SLOW).run_id
    wait_until(lambda: "c s2" in setup.executions(), 60, "s2 started")
    daemon.stop(signal.SIGKILL)
    daemon = setup.daemon()
    try:
        out = setup.cli("plan", "attach", run_id)
        assert out.returncode == 0, out.stderr
        assert "status: completed" in out.stdout
        assert json.dumps(value_of("c", 3), sort_keys=True) in out.stdout
        again = setup.cli("plan", "attach", run_id, "--json")  # ended: its kept result
        assert again.returncode == 0 and '"status":"completed"' in again.stdout.splitlines()[-1]
        missing = setup.cli("plan", "attach", "drun_" + "0" * 32)
        assert missing.returncode != 0 and "unknown_durable_run" in missing.stderr
    finally:
        assert daemon.stop() == 0, "".join(daemon.lines)


def as_uid(uid: int, socket: Path, run_id: str) -> list[str]:
    """In a forked child that became `uid` (setgid/setuid, no groups): how many durable
    runs it is shown, then what attaching to `run_id` says."""
    with phloem.Client.connect(socket) as client:  # load every module the child needs
        client.durable_planning_runs()
        raises_kind(client.attach_planning, "drun_" + "0" * 32)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            words = []
            with phloem.Client.connect(socket) as client:
                words.append(str(len(client.durable_planning_runs())))
                try:
                    client.attach_planning(run_id)
                    words.append("attached")
                except PhloemError as err:
                    words.append(err.kind)
            os.write(write, " ".join(words).encode())
        except BaseException as exc:
            os.write(write, f"error {type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        text = answer.read().decode()
    os.waitpid(pid, 0)
    return text.split()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another uid")
def test_a_client_of_another_uid_is_refused(setup: Setup) -> None:
    nobody = pwd.getpwnam("nobody").pw_uid
    assert nobody == 65534
    os.chmod(setup.d, 0o711)  # nobody may reach the socket (the daemon allows its uid)
    daemon = setup.daemon()
    try:
        goal = {"key": "n", "steps": 1, "log": str(setup.log)}
        with phloem.Client.connect(setup.socket) as client:
            started = client.start_planning_run("d", "d", goal, {}, SLOW)
            client.await_planning(started.ref, timeout=60)
        assert as_uid(nobody, setup.socket, started.run_id) == ["0", "not_planning_owner"]
        with phloem.Client.connect(setup.socket) as client:  # its own uid still may
            assert client.attach_planning(started.run_id).run_id == started.run_id
    finally:
        assert daemon.stop() == 0, "".join(daemon.lines)


def test_attach_by_another_uid_through_the_credential_seam(setup: Setup) -> None:
    """The same check without root: the owner's uid is what the connection's peer
    credentials said, so an in-process owner of another uid stands in for one."""
    from phloem.actors.planning import AdapterRegistry, PlanningRuntime
    from phloem.actors.runs.journal import JournalLimits, RunJournals
    from phloem.supervision.refs import Owner

    adapters = AdapterRegistry.load(
        {"d": "tests.actors.planning.durable_adapters:DurablePlanner"},
        {"d": "tests.actors.planning.durable_adapters:LoggingExecutor"},
    )
    journals = RunJournals(setup.d / "journals", "planning", JournalLimits())
    rt = PlanningRuntime(adapters, name="durable-seam", journals=journals)
    try:
        owner = Owner.client("starter")
        goal = {"key": "x", "steps": 1, "log": str(setup.log)}
        run = rt.start(owner, "d", "d", goal, {}, {"durable": True})
        rt.await_result(owner, run, 60)
        stranger = Owner.connection("pid=1 uid=4242", uid=4242)
        assert raises_kind(rt.attach, stranger, run.durable_id) == "not_planning_owner"
    finally:
        rt.stop()
