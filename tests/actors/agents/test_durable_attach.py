"""Reattaching to a durable agent run through a real daemon: after a kill -9 and a
restart, a new connection attaches to the resumed run by its durable id and follows it
to its result, or cancels it; `phloem runs --durable` lists it with its kind; a client
of another uid is refused (a real other uid — `nobody` — when the tests run as root)."""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import phloem
from phloem.protocols.errors import PhloemError
from tests.actors.agents.test_durable_agent import config
from tests.helpers import ROOT, DaemonProc, raises_kind, short_tmpdir, wait_until
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

pytestmark = pytest.mark.timeout(150)

MISSING = "drun_" + "0" * 32


class Setup:
    def __init__(self, d: Path, fake: FakeProvider) -> None:
        self.d = d
        self.fake = fake
        (d / "ws").mkdir()
        self.config = d / "phloem.toml"
        extra = "[daemon]\nallowed_uids = [65534]\n" if os.getuid() == 0 else ""
        self.config.write_text(extra + config(fake.base_url, d))
        self.socket = d / "run" / "phloem.sock"
        self.env = {"XDG_STATE_HOME": str(d / "state")}

    def daemon(self) -> DaemonProc:
        return DaemonProc(self.socket, self.config, env=self.env).wait_ready()

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
        with FakeProvider() as fake:
            yield Setup(d, fake)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_reattach_to_a_resumed_agent_run_from_a_new_connection(setup: Setup) -> None:
    marker = setup.d / "ws" / "ran.txt"
    gate = threading.Event()  # holds the resumed run's model answer until we attached
    command = "echo ran >> ran.txt; sleep 60"
    setup.fake.add(
        chat_calls(chat_tool_call("bash", json.dumps({"command": command}), "c1")),
        dataclasses.replace(chat_text("Finished after the restart."), gate=gate),
    )
    daemon = setup.daemon()
    with phloem.Client.connect(setup.socket) as client:
        run_id = client.start_agent_run("worker", input="run it", durable=True).run_id
    wait_until(marker.exists, 60, "the tool call began")
    daemon.stop(signal.SIGKILL)
    daemon = setup.daemon()
    try:
        wait_until(lambda: len(setup.fake.requests) == 2, 60, "the resumed run asks the model")
        listed = setup.cli("runs", "--durable", "--json")
        assert listed.returncode == 0, listed.stderr
        [info] = json.loads(listed.stdout)
        assert info["id"] == run_id and info["kind"] == "agent" and info["outcome"] is None
        with phloem.Client.connect(setup.socket) as client:
            started = client.attach_agent(run_id)
            assert started.run_id == run_id and started.ref.startswith("agentrun_")
            gate.set()
            run = client.follow_agent_run(started, timeout=60)
        assert run.outcome.ok, run.outcome
        assert "Finished after the restart." in msgspec.json.encode(run).decode()
        assert len(setup.fake.requests) == 2  # the answered request was not asked again
        table = setup.cli("runs", "--durable")
        assert run_id in table.stdout and "agent" in table.stdout and "done" in table.stdout
        with phloem.Client.connect(setup.socket) as client:  # ended: its kept end, again
            again = client.follow_agent_run(client.attach_agent(run_id), timeout=60)
            assert again.outcome.ok
            assert "Finished after the restart." in msgspec.json.encode(again).decode()
            assert raises_kind(client.attach_agent, MISSING) == "unknown_durable_run"
        assert len(setup.fake.requests) == 2
    finally:
        gate.set()
        assert daemon.stop() == 0, "".join(daemon.lines)
    assert marker.read_text() == "ran\n"


def test_cancel_a_resumed_agent_run_after_attaching(setup: Setup) -> None:
    marker = setup.d / "ws" / "ran.txt"
    gate = threading.Event()  # the resumed run's model call stays in flight
    command = "echo ran >> ran.txt; sleep 60"
    setup.fake.add(
        chat_calls(chat_tool_call("bash", json.dumps({"command": command}), "c1")),
        dataclasses.replace(chat_text("never seen"), gate=gate),
    )
    daemon = setup.daemon()
    with phloem.Client.connect(setup.socket) as client:
        run_id = client.start_agent_run("worker", input="run it", durable=True).run_id
    wait_until(marker.exists, 60, "the tool call began")
    daemon.stop(signal.SIGKILL)
    daemon = setup.daemon()
    try:
        wait_until(lambda: len(setup.fake.requests) == 2, 60, "the resumed run asks the model")
        with phloem.Client.connect(setup.socket) as client:
            started = client.attach_agent(run_id)
            client.cancel_agent_run(started.ref)
            run = client.follow_agent_run(started, timeout=60)
            [info] = client.durable_agent_runs()
        assert run.outcome.status == "cancelled", run.outcome
        assert info.id == run_id and info.outcome == "cancelled"
    finally:
        gate.set()
        assert daemon.stop() == 0, "".join(daemon.lines)
    assert marker.read_text() == "ran\n"


def as_uid(uid: int, socket: Path, run_id: str) -> list[str]:
    """In a forked child that became `uid` (setgid/setuid, no groups): how many durable
    agent runs it is shown, then what attaching to `run_id` says."""
    with phloem.Client.connect(socket) as client:  # load every module the child needs
        client.durable_agent_runs()
        raises_kind(client.attach_agent, MISSING)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            words = []
            with phloem.Client.connect(socket) as client:
                words.append(str(len(client.durable_agent_runs())))
                try:
                    client.attach_agent(run_id)
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
    setup.fake.add(chat_text("done at once"))
    daemon = setup.daemon()
    try:
        with phloem.Client.connect(setup.socket) as client:
            started = client.start_agent_run("worker", input="hi", durable=True)
            assert client.follow_agent_run(started, timeout=60).outcome.ok
        assert as_uid(nobody, setup.socket, started.run_id) == ["0", "not_planning_owner"]
        with phloem.Client.connect(setup.socket) as client:  # its own uid still may
            assert client.attach_agent(started.run_id).run_id == started.run_id
            assert [i.id for i in client.durable_agent_runs()] == [started.run_id]
    finally:
        assert daemon.stop() == 0, "".join(daemon.lines)


def test_attach_by_another_uid_through_the_credential_seam(setup: Setup) -> None:
    """The same check without root: the owner's uid is what the connection's peer
    credentials said, and the one check (`runjournal.check_owner`) compares it."""
    from phloem.actors.runs.journal import JournalLimits, RunJournals, check_owner

    journals = RunJournals(setup.d / "journals", "agent", JournalLimits(sync=False))
    journal = journals.create(os.getuid(), "worker", {"name": "worker"})
    check_owner(os.getuid(), journal)
    assert raises_kind(check_owner, os.getuid() + 4242, journal) == "not_planning_owner"
