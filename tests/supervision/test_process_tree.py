"""Nothing left behind: grandchildren, a dying fork server, and 1,000 start/stop cycles."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest

from phloem.base import logs as phloem_logs
from phloem.supervision import forkserver, process, threadpark
from phloem.supervision._bootstrap import POOL_SIZE
from phloem.supervision.handle import ChildStartError
from phloem.supervision.process import MAX_START_ATTEMPTS, ProcessHandle, start_process
from phloem.supervision.proctree import proc_table
from phloem.supervision.reasons import SERVER_LOST, ExitKind, ExitReason
from phloem.supervision.spec import Command, ProcessTarget
from tests.helpers import wait_until
from tests.supervision import process_targets as targets
from tests.supervision.process_fixtures import lean_fork_server  # noqa: F401

pytestmark = pytest.mark.usefixtures("lean_fork_server")


def descendants(pid: int) -> list[int]:
    table = proc_table()
    out, stack = [], [pid]
    while stack:
        parent = stack.pop()
        kids = [p for p, (ppid, _, zombie) in table.items() if ppid == parent and not zombie]
        out += kids
        stack += kids
    return out


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def sleepers_of(h: ProcessHandle, count: int) -> list[int]:
    """Wait until `h` has `count` `sleep` descendants; their pids."""
    found: list[int] = []

    def ready() -> bool:
        found[:] = [p for p in descendants(h.pid) if _name(p) == "sleep"]
        return len(found) >= count

    wait_until(ready)
    return found


def _name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.NoSuchProcess:
        return ""


@pytest.mark.timeout(30)
def test_stopping_a_command_leaves_no_grandchildren_even_setsid_ones() -> None:
    h = start_process(Command(["bash", "-c", "sleep 300 & setsid sleep 300 & wait"]), name="tree")
    sleepers = sleepers_of(h, 2)
    assert any(os.getsid(p) == p for p in sleepers)  # one left the session and group
    assert h.stop(5) == ExitReason(ExitKind.SHUTDOWN, signal=signal.SIGTERM)
    assert all(gone(p) for p in sleepers)


@pytest.mark.timeout(30)
def test_killing_a_target_with_a_process_tree_leaves_nothing_behind() -> None:
    h = start_process(ProcessTarget(targets.serve, pass_channel=True), name="tree")
    info = h.request({"op": "spawn_tree"}, timeout=10)
    sleepers = sleepers_of(h, 2)
    assert int(info["line"]) in sleepers
    assert h.stop(0) == ExitReason(ExitKind.KILLED, signal=signal.SIGKILL)
    assert all(gone(p) for p in [info["bash"], *sleepers])


@pytest.mark.timeout(30)
def test_grandchildren_of_a_child_killed_from_outside_are_cleaned_up() -> None:
    h = start_process(Command(["bash", "-c", "sleep 300 & setsid sleep 300 & wait"]), name="tree")
    sleepers = sleepers_of(h, 2)
    os.kill(h.pid, signal.SIGKILL)
    assert h.wait(10) == ExitReason(ExitKind.KILLED, detail="signal 9", signal=9)
    assert all(gone(p) for p in sleepers)


@pytest.mark.timeout(30)
def test_a_dead_fork_server_is_survived_and_its_children_are_reported_killed() -> None:
    h = start_process(ProcessTarget(targets.run_forever), name="orphan")
    old = forkserver.server_pid()
    assert old is not None
    os.kill(old, signal.SIGKILL)
    reason = h.wait(10)
    assert reason == ExitReason.killed(SERVER_LOST) and reason.server_lost
    assert gone(h.pid)
    fresh = start_process(ProcessTarget(targets.echo, pass_channel=True), name="fresh")
    try:
        assert forkserver.server_pid() not in (None, old)
        assert fresh.request("hello", timeout=5) == "hello"
    finally:
        fresh.stop(0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("attempts", [MAX_START_ATTEMPTS, 1], ids=["default", "one-attempt"])
def test_a_start_the_dying_fork_server_took_along_is_made_again_on_a_fresh_one(
    attempts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server is stopped, its idle children used up: the next start waits on the
    # server itself when it is killed. Its running children die with it, typed once;
    # the start goes to a fresh server and succeeds — unless it has no attempt left.
    monkeypatch.setattr(process, "MAX_START_ATTEMPTS", attempts)
    server = forkserver.get_server()
    os.kill(server.pid, signal.SIGSTOP)
    held: list[ProcessHandle] = []
    started: list[ProcessHandle | BaseException] = []
    sent = _spawn_sent_from(server, "waiting-start")
    try:
        while server._idle:
            held.append(start_process(ProcessTarget(targets.run_forever), name="pooled"))
        waiting = threading.Thread(
            target=lambda: started.append(_start_echo()), name="waiting-start"
        )
        waiting.start()
        # Its Spawn is with the stopped server: registered *and* sent (a kill between the
        # two fails the send, and a request the server never got is rightly sent to the
        # next one, whatever the attempts).
        assert sent.wait(10), "the waiting start sent no Spawn"
        assert server._pending
    finally:
        os.kill(server.pid, signal.SIGKILL)
    waiting.join(30)
    for h in held:
        reason = h.wait(10)
        assert reason is not None and reason.server_lost, reason
    [fresh] = started
    if attempts == 1:
        assert isinstance(fresh, ChildStartError) and fresh.reason.server_lost, fresh
        return
    assert isinstance(fresh, ProcessHandle), fresh
    try:
        assert forkserver.server_pid() not in (None, server.pid)
        assert fresh.request("hello", timeout=5) == "hello"
    finally:
        fresh.stop(0)


def _spawn_sent_from(server: forkserver.ForkServer, thread: str) -> threading.Event:
    """Set once a send to `server` from the thread named `thread` has returned."""
    sent = threading.Event()
    send = server._send

    def _send(data: bytes, fds: Sequence[int] = ()) -> None:
        send(data, fds)
        if threading.current_thread().name == thread:
            sent.set()

    server._send = _send  # type: ignore[method-assign]
    return sent


def _start_echo() -> ProcessHandle | BaseException:
    try:
        return start_process(ProcessTarget(targets.echo, pass_channel=True), name="late")
    except BaseException as exc:  # the test asserts on it
        return exc


def _counts() -> tuple[int, int, int, int]:
    me = psutil.Process()
    server = forkserver.server_pid()
    server_children = len(psutil.Process(server).children()) if server else 0
    return (
        len(os.listdir("/proc/self/fd")),
        threading.active_count(),
        len(me.children()),
        server_children,
    )


LEAK_SLACK = 2
"""Files or threads another test of the same worker may hold for a moment."""


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_a_thousand_start_stop_cycles_leak_no_fds_threads_or_processes() -> None:
    target = ProcessTarget(os.getpid)
    start_process(target, name="warmup").stop(0)
    wait_until(lambda: _counts()[3] == POOL_SIZE)  # only the idle pre-forked child
    wait_until(lambda: threadpark.parked_count() == 0)  # parked actor threads end meanwhile
    before = _counts()
    for i in range(1_000):
        h = start_process(target, name=f"cycle-{i}")
        reason = h.stop(0)
        assert reason.kind in (ExitKind.KILLED, ExitKind.SHUTDOWN, ExitKind.NORMAL)

    def settled() -> bool:
        """Nothing of the thousand cycles is left. Other tests of this worker may still
        be ending threads and files of their own meanwhile (so fewer is fine), and a leak
        would be one per cycle (hundreds), not the `LEAK_SLACK` allowed here."""
        fds, threads, children, server_children = _counts()
        return (
            fds <= before[0] + LEAK_SLACK
            and threads <= before[1] + LEAK_SLACK
            and children <= before[2]
            and server_children == before[3]
        )

    wait_until(
        settled, timeout=10, what=f"(fds, threads, children, server children) back to {before}"
    )


_DAEMON = """
import sys
from phloem.base import logs as phloem_logs
from phloem.supervision import forkserver
from phloem.supervision.process import start_process
from phloem.supervision.spec import Command
h = start_process(Command(["bash", "-c", "sleep 300 & setsid sleep 300 & wait"]), name="x")
print(forkserver.server_pid(), h.pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.timeout(30)
def test_when_the_daemon_dies_the_fork_server_takes_every_child_and_grandchild_with_it() -> None:
    root = Path(__file__).parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", _DAEMON], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root
    )
    try:
        assert proc.stdout is not None
        server, child = map(int, proc.stdout.readline().split())
        sleepers: list[int] = []

        def both_sleeping() -> bool:
            sleepers[:] = [p for p in descendants(child) if _name(p) == "sleep"]
            return len(sleepers) == 2

        wait_until(both_sleeping)
    finally:
        proc.kill()
        proc.wait()
    wait_until(lambda: all(gone(p) for p in [server, child, *sleepers]))


def _idle_children() -> list[int]:
    server = forkserver.server_pid()
    assert server is not None
    table = proc_table()
    return [p for p, (ppid, _, zombie) in table.items() if ppid == server and not zombie]


@pytest.mark.timeout(30)
def test_a_killed_idle_child_of_the_pool_is_replaced_and_starts_keep_working() -> None:
    start_process(ProcessTarget(os.getpid), name="warm").stop(0)
    wait_until(lambda: len(_idle_children()) == POOL_SIZE)
    idle = _idle_children()
    for pid in idle:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not set(idle) & set(proc_table()))  # reaped by the server
    h = start_process(ProcessTarget(targets.echo, pass_channel=True), name="after")
    try:
        assert h.request("ok", timeout=5) == "ok"
    finally:
        h.stop(0)
    wait_until(lambda: len(_idle_children()) == POOL_SIZE)


@pytest.mark.timeout(30)
def test_the_process_answering_is_always_the_one_the_handle_names() -> None:
    # Regression: a hand-off to the idle child could be taken for a failure when the
    # child closed its socket quickly, and the request was then forked a second time.
    for _ in range(60):
        h = start_process(ProcessTarget(targets.serve, pass_channel=True), name="who")
        assert h.request({"op": "pid"}, timeout=5) == h.pid
        h.send({"op": "exit", "code": 0})
        assert h.wait(5) == ExitReason(ExitKind.NORMAL, exit_code=0)


def _has_module(name: str) -> ProcessTarget:
    code = f"__import__('os')._exit(0 if {name!r} in __import__('sys').modules else 3)"
    return ProcessTarget(eval, (code,))


@pytest.mark.timeout(30)
def test_configured_preload_modules_are_already_imported_in_children() -> None:
    running = start_process(ProcessTarget(targets.run_forever), name="running")
    assert start_process(_has_module("colorsys"), name="check").wait(10) == ExitReason(
        ExitKind.EXCEPTION, error_type="ExitStatus", detail="exit status 3", exit_code=3
    )
    forkserver.configure(["colorsys"])
    try:
        forkserver.shutdown_server()  # its children go with it
        assert running.wait(10) == ExitReason.killed("fork server died")
        assert start_process(_has_module("colorsys"), name="check").wait(10) == (
            ExitReason(ExitKind.NORMAL, exit_code=0)
        )
    finally:
        forkserver.configure([])
        forkserver.shutdown_server()


@pytest.mark.timeout(30)
def test_modules_added_to_a_running_server_are_in_every_child_started_after() -> None:
    server = forkserver.server_pid() or forkserver.get_server().pid
    wait_until(lambda: len(_idle_children()) == POOL_SIZE)  # forked before the preload
    stale = set(_idle_children())
    running = start_process(ProcessTarget(targets.run_forever), name="running")
    try:
        assert start_process(_has_module("wave"), name="before").wait(10) == ExitReason(
            ExitKind.EXCEPTION, error_type="ExitStatus", detail="exit status 3", exit_code=3
        )
        assert forkserver.add_preload(["wave"]) is True
        assert forkserver.add_preload(["wave"]) is False  # nothing new: nothing sent
        for i in range(POOL_SIZE + 1):  # the prepared children were retired, not used
            assert start_process(_has_module("wave"), name=f"after-{i}").wait(10) == (
                ExitReason(ExitKind.NORMAL, exit_code=0)
            )
        assert forkserver.server_pid() == server  # the same server, its children alive
        assert running.exit_reason is None
        # The retired children ended (their sockets closed) and the pool is full again.
        stale.discard(running.pid)  # it was one of them, and it is in use
        wait_until(lambda: not stale & set(proc_table()))
        wait_until(lambda: len(set(_idle_children()) - {running.pid}) == POOL_SIZE)
    finally:
        running.stop(0)
        forkserver.configure([m for m in forkserver.preloaded() if m != "wave"])
        forkserver.shutdown_server()


@pytest.mark.timeout(30)
def test_a_preload_that_fails_is_reported_by_the_daemon_and_children_still_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forkserver.configure(["phloem_no_such_module_xyz"])
    phloem_logs.use_stdlib()
    caplog.set_level(logging.INFO, logger="phloem")
    try:
        forkserver.shutdown_server()
        h = start_process(ProcessTarget(os.getpid), name="after-bad-preload")
        assert h.wait(10) == ExitReason(ExitKind.NORMAL, exit_code=0)

        def notices() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.msg.startswith("forkserver_preload_failed")]

        wait_until(lambda: bool(notices()))
        assert "phloem_no_such_module_xyz" in notices()[0].phloem["detail"]  # type: ignore[attr-defined]
    finally:
        phloem_logs.configure_logging("warning", "console")
        forkserver.configure([])
        forkserver.shutdown_server()
