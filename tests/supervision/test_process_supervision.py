"""Process children under supervisors: crashes noticed, restarts, caps, no leftovers."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from phloem.supervision import (
    ChildSpec,
    Command,
    Limits,
    ProcessTarget,
    Supervisor,
    SupervisorRef,
    SupervisorSpec,
    tree_snapshot,
)
from phloem.supervision.process import ProcessHandle
from tests.supervision import process_targets

pytestmark = pytest.mark.timeout(60)


def _proc(sup: SupervisorRef, child_id: str) -> ProcessHandle:
    info = next(i for i in sup.which_children() if i.id == child_id)
    assert isinstance(info.ref, ProcessHandle)
    return info.ref


def _wait_new(sup: SupervisorRef, child_id: str, before: ProcessHandle) -> ProcessHandle:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = next(i for i in sup.which_children() if i.id == child_id)
        if isinstance(info.ref, ProcessHandle) and info.ref is not before:
            return info.ref
        before.wait(0.01)
    raise AssertionError(f"{child_id} was not restarted")


def _echo_spec(child_id: str, **kwargs: object) -> ChildSpec:
    target = ProcessTarget(process_targets.serve, pass_channel=True)
    return ChildSpec(child_id, target, **kwargs)  # type: ignore[arg-type]


def test_kill_9_of_a_process_child_is_noticed_and_restarted() -> None:
    sup = Supervisor.start(SupervisorSpec(), [_echo_spec("p")])
    before = _proc(sup, "p")
    os.kill(before.pid, signal.SIGKILL)
    reason = before.wait(10)
    assert reason is not None and reason.kind == "killed"
    after = _wait_new(sup, "p", before)
    assert after.pid != before.pid
    assert after.request({"op": "env", "name": "HOME"}, timeout=10) == os.environ.get("HOME")
    assert sup.which_children()[0].restarts == 1


def test_a_child_past_its_memory_cap_ends_heap_exceeded_while_siblings_keep_running() -> None:
    capped = ChildSpec(
        "hog",
        ProcessTarget(process_targets.allocate, (2 << 30,)),
        restart="temporary",
        limits=Limits(max_memory_bytes=128 << 20),
    )
    sup = Supervisor.start(SupervisorSpec(), [_echo_spec("sibling")])
    sibling = _proc(sup, "sibling")
    hog = sup.start_child(capped)
    reason = hog.wait(20)
    assert reason is not None and reason.kind == "heap_exceeded"
    assert sibling.is_alive()
    assert sibling.request({"op": "env", "name": "X_UNSET"}, timeout=10) is None
    assert sup.is_alive()


def test_terminating_a_command_child_leaves_no_grandchildren() -> None:
    script = "sleep 300 & setsid sleep 300 & bash -c 'sleep 300' & wait"
    sup = Supervisor.start(
        SupervisorSpec(), [ChildSpec("cmd", Command(["bash", "-c", script]), shutdown=1.0)]
    )
    cmd = _proc(sup, "cmd")
    deadline = time.monotonic() + 10
    tree: list[psutil.Process] = []
    while time.monotonic() < deadline:
        tree = psutil.Process(cmd.pid).children(recursive=True)
        if len(tree) >= 3:
            break
        cmd.wait(0.02)
    assert len(tree) >= 3
    sup.terminate_child("cmd")
    _gone, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == []
    assert not psutil.pid_exists(cmd.pid)  # reaped, not a zombie


def test_snapshot_shows_pid_and_resident_memory_of_process_children() -> None:
    sup = Supervisor.start(SupervisorSpec(), [_echo_spec("p")], name="procs")
    (root,) = tree_snapshot([sup]).roots
    (node,) = root.children
    assert node.type == "process" and node.pid == _proc(sup, "p").pid
    assert node.rss_bytes is not None and node.rss_bytes > 0


def test_snapshot_shows_the_tree_memory_cap_and_the_watchdogs_reading() -> None:
    from phloem.cli.render import render_tree

    limits = Limits(max_memory_bytes=256 * 1024 * 1024)
    sup = Supervisor.start(SupervisorSpec(), [_echo_spec("p", limits=limits)], name="capped")
    try:
        deadline = time.monotonic() + 10
        while True:
            (node,) = tree_snapshot([sup]).roots[0].children
            if node.tree_rss_bytes is not None or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert node.rss_cap_bytes == 256 * 1024 * 1024
        assert node.tree_processes == 1
        assert node.tree_rss_bytes is not None and node.tree_rss_bytes > 0
        text = render_tree(tree_snapshot([sup]))
        assert "in 1 procs / cap 256.0 MiB (rss watchdog)" in text, text
    finally:
        sup.stop()
