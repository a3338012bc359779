"""Process children an actor starts for its work: listed under it, titled, gone when done."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from phloem.cli.render import render_tree
from phloem.cli.rows import plain
from phloem.cli.top import top_view
from phloem.protocols.snapshot import NodeSnapshot
from phloem.supervision import (
    Actor,
    ChildSpec,
    Command,
    Limits,
    ProcessHandle,
    ProcessTarget,
    Supervisor,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    forkserver,
    owners,
    snapshot,
    start_process,
    tree_snapshot,
)
from phloem.supervision._bootstrap import SERVER_TITLE
from phloem.supervision._child import IDLE_TITLE
from phloem.supervision.childcall import CallControl, ChildCallError, call_in_child
from phloem.supervision.childwire import MAX_REPORTED_SPAWNS
from phloem.supervision.stdio import stdio_child
from tests.helpers import PY, ROOT, ps_args, wait_until
from tests.supervision.process_targets import echo

pytestmark = pytest.mark.timeout(60)

CAP = 256 * 1024 * 1024


def wait_for_gate(path: str) -> str:
    """A call's work that waits until `path` exists (the test's release)."""
    import time

    while not os.path.exists(path):
        time.sleep(0.01)
    return "released"


def report_many(ch: Any, n: int) -> None:
    """Reports `n` programs (itself, for a pid that exists), then serves echo."""
    from phloem.supervision._child import report_spawned

    for i in range(n):
        report_spawned(os.getpid(), f"prog{i}")
    echo(ch)


class Owner(Actor):
    """Starts process children for its work: on its own thread, or on a carried one."""

    def __init__(self) -> None:
        super().__init__()
        self.handles: list[ProcessHandle] = []

    def on_receive(self, message: Any) -> Any:
        match message:
            case ("start", name):
                handle = start_process(
                    ProcessTarget(echo, pass_channel=True),
                    name=name,
                    limits=Limits(max_memory_bytes=CAP),
                )
                self.handles.append(handle)
                return handle
            case ("command", name):
                handle = start_process(Command(["sleep", "60"]), name=name)
                self.handles.append(handle)
                return handle
            case ("call", gate, control, done):

                def work() -> None:
                    try:
                        done["value"] = call_in_child(
                            wait_for_gate, gate, name="gated", timeout=30, control=control
                        )
                    except ChildCallError as exc:
                        done["error"] = exc
                    done["event"].set()

                threading.Thread(target=owners.carry(work), daemon=True).start()
                return None
        return None


@pytest.fixture
def tree() -> Iterator[SupervisorRef]:
    inner = SupervisorChild(SupervisorSpec(), [ChildSpec("owner", Owner)])
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("work", inner)], name="top")
    yield sup
    sup.stop(10.0)


def owner_node(sup: SupervisorRef) -> NodeSnapshot:
    (root,) = tree_snapshot([sup]).roots
    (work,) = root.children
    (node,) = work.children
    assert node.id == "owner"
    return node


def owner_handle(sup: SupervisorRef) -> Any:
    (work,) = sup.which_children()
    (owner,) = work.ref.which_children()
    return owner.ref


def test_a_process_an_actor_starts_is_listed_under_it_with_pid_rss_cap_and_title(
    tree: SupervisorRef,
) -> None:
    handle = owner_handle(tree).ask(("start", "helper"))
    node = owner_node(tree)
    (proc,) = node.children
    assert (proc.id, proc.type, proc.state) == ("helper", "process", "running")
    assert proc.pid == handle.pid
    assert proc.rss_bytes and proc.rss_bytes > 0
    assert proc.rss_cap_bytes == CAP
    assert ps_args(handle.pid) == "phloem: work/owner helper"
    snap = tree_snapshot([tree])
    assert snap.processes == 1 and snap.actors == 1
    handle.stop(5.0)
    assert owner_node(tree).children == []
    assert tree_snapshot([tree]).processes == 0


def test_a_command_keeps_its_own_command_line_and_is_listed_while_it_runs(
    tree: SupervisorRef,
) -> None:
    handle = owner_handle(tree).ask(("command", "sleeper"))
    (proc,) = owner_node(tree).children
    assert (proc.id, proc.pid) == ("sleeper", handle.pid)
    wait_until(lambda: ps_args(handle.pid) == "sleep 60", what="the exec")
    handle.kill()
    handle.wait(10)
    assert owner_node(tree).children == []


def test_a_call_from_a_thread_the_actor_carries_is_its_child_until_it_answers(
    tree: SupervisorRef, tmp_path: Any
) -> None:
    gate = str(tmp_path / "gate")
    control = CallControl()
    done: dict[str, Any] = {"event": threading.Event()}
    owner_handle(tree).ask(("call", gate, control, done))
    wait_until(lambda: owner_node(tree).children != [], what="the call's child")
    (proc,) = owner_node(tree).children
    assert proc.id == "gated" and proc.pid == control.pid and proc.rss_bytes
    assert ps_args(proc.pid) == "phloem: work/owner gated"
    open(gate, "w").close()
    assert done["event"].wait(30) and done["value"] == "released"
    assert owner_node(tree).children == []


def test_a_thread_that_is_nobodys_work_attaches_nothing_and_is_titled_by_name() -> None:
    assert owners.current_owner() is None
    handle = start_process(ProcessTarget(echo, pass_channel=True), name="loose")
    try:
        assert ps_args(handle.pid) == "phloem: loose"
    finally:
        handle.stop(5.0)


def test_a_carried_function_runs_with_the_callers_owner_and_only_inside_it(
    tree: SupervisorRef,
) -> None:
    marker = owner_handle(tree)
    with owners.owned_by(marker):
        seen = owners.carry(owners.current_owner)
    result: list[Any] = []
    t = threading.Thread(target=lambda: result.extend([seen(), owners.current_owner()]))
    t.start()
    t.join(10)
    assert result == [marker, None]


def test_past_the_per_node_limit_children_are_counted_not_listed(
    tree: SupervisorRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "MAX_LISTED_PROCESSES", 2)
    owner = owner_handle(tree)
    handles = [owner.ask(("start", f"h{i}")) for i in range(2)]
    node = owner_node(tree)
    assert [c.id for c in node.children] == ["h0", "h1"] and node.unlisted_processes == 0
    handles.append(owner.ask(("start", "h2")))
    node = owner_node(tree)
    assert [c.id for c in node.children] == ["h0", "h1"] and node.unlisted_processes == 1
    snap = tree_snapshot([tree])
    assert snap.processes == 3
    text = render_tree(snap)
    assert "    ├── h1  process" in text and "    └── … 1 more process (not listed)" in text
    assert "      … 1 more process (not listed)" in plain(top_view(snap), 80).splitlines()
    handles[0].stop(5.0)
    node = owner_node(tree)
    assert [c.id for c in node.children] == ["h1", "h2"] and node.unlisted_processes == 0
    for h in handles[1:]:
        h.stop(5.0)


def test_a_supervisors_process_child_is_titled_by_its_path() -> None:
    inner = SupervisorChild(
        SupervisorSpec(), [ChildSpec("proc", ProcessTarget(echo, pass_channel=True))]
    )
    sup = Supervisor.start(
        SupervisorSpec(),
        [ChildSpec("direct", ProcessTarget(echo, pass_channel=True)), ChildSpec("inner", inner)],
        name="root",
    )
    direct, inner_info = sup.which_children()
    (proc,) = inner_info.ref.which_children()
    assert ps_args(direct.pid) == "phloem: direct"
    assert ps_args(proc.pid) == "phloem: inner/proc"
    (root,) = tree_snapshot([sup]).roots
    assert [c.children for c in root.children if c.id == "direct"] == [[]]  # not twice
    sup.stop(10.0)


def test_a_bridges_program_is_listed_under_it_with_its_own_pid_and_memory() -> None:
    sup = Supervisor.start(
        SupervisorSpec(),
        [ChildSpec("server", stdio_child(["cat"]), limits=Limits(max_memory_bytes=CAP))],
        name="bridges",
    )
    (info,) = sup.which_children()
    bridge = info.ref
    assert ps_args(bridge.pid) == "phloem: server"

    def program() -> NodeSnapshot | None:
        (root,) = tree_snapshot([sup]).roots
        (node,) = root.children
        return node.children[0] if node.children else None

    wait_until(lambda: program() is not None, what="the bridge's report")
    cat = program()
    assert cat is not None and cat.id == "cat" and cat.type == "process"
    assert cat.pid != bridge.pid and psutil.Process(cat.pid).ppid() == bridge.pid
    assert cat.rss_bytes and cat.rss_bytes > 0
    assert ps_args(cat.pid) == "cat"
    assert tree_snapshot([sup]).processes == 2
    sup.terminate_child("server")
    (root,) = tree_snapshot([sup]).roots
    assert tree_snapshot([sup]).processes == 0 and root.children[0].children == []
    sup.stop(10.0)


def test_a_child_reports_at_most_max_reported_spawns_programs() -> None:
    handle = start_process(
        ProcessTarget(report_many, (MAX_REPORTED_SPAWNS + 1,), pass_channel=True), name="many"
    )
    try:
        assert handle.request("sync", timeout=10) == "sync"  # reported before it echoes
        listed = handle.attached()
        assert [c.name for c in listed] == [f"prog{i}" for i in range(MAX_REPORTED_SPAWNS)]
        assert all(c.stats().pid == handle.pid for c in listed)
    finally:
        handle.stop(5.0)
    assert handle.attached() == []


def test_a_cancelled_call_leaves_its_owner_at_once(tree: SupervisorRef, tmp_path: Any) -> None:
    control = CallControl()
    done: dict[str, Any] = {"event": threading.Event()}
    owner_handle(tree).ask(("call", str(tmp_path / "never"), control, done))
    wait_until(lambda: owner_node(tree).children != [], what="the call's child")
    control.cancel(wait=10)
    assert owner_node(tree).children == []
    assert done["event"].wait(30)
    assert isinstance(done["error"], ChildCallError) and done["error"].kind == "child_cancelled"


def test_outside_a_process_child_reporting_a_program_writes_nothing() -> None:
    code = (
        "import os\n"
        "os.open(os.devnull, os.O_RDONLY)\n"  # fd 3 taken: the pipe's ends are above it
        "r, w = os.pipe()\n"
        "os.dup2(w, 3)\n"  # where a child's status pipe would be
        "os.close(w)\n"
        "from phloem.supervision._child import report_spawned\n"
        "report_spawned(os.getpid(), 'x')\n"
        "os.close(3)\n"
        "print(len(os.read(r, 100)))\n"
    )
    done = subprocess.run(
        [PY, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.stdout.strip() == "0"


def test_the_fork_server_and_its_prepared_children_are_titled() -> None:
    server = forkserver.get_server()
    # a fork server just started may not have reached its title yet (a busy machine)
    wait_until(lambda: ps_args(server.pid) == SERVER_TITLE, what="the fork server's title")

    def idle() -> list[str]:
        return [ps_args(c.pid) for c in psutil.Process(server.pid).children()]

    wait_until(lambda: IDLE_TITLE in idle(), what="a child forked ahead of time")


def test_a_title_is_one_printable_line_of_at_most_max_title_chars() -> None:
    assert owners.title("a\nb\x00c") == "phloem: a b c"
    long = owners.title("x" * owners.MAX_TITLE_CHARS)
    assert len(long) == owners.MAX_TITLE_CHARS and long.startswith("phloem: xxx")
    assert len(owners.title("x" * (owners.MAX_TITLE_CHARS - 9))) == owners.MAX_TITLE_CHARS - 1
