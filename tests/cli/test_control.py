"""`phloem start|stop|restart PATH` as a supervisorctl user types them, against a real
daemon: a service stopped by hand is `stopped` in `tree` and `status` and stays down
until started; neither the stop nor a restart is charged to its supervisor's intensity;
unknown paths and the root are one typed line and exit code 1; `phloem restart
planning/service` while planning runs are active changes the service's incarnation and
nothing under its sibling `runs` supervisor. The Python clients have the same methods."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import phloem
from phloem.client.aio import AsyncClient
from phloem.protocols.errors import PhloemError
from tests.helpers import PY, ROOT, DaemonProc, pids_alive, run_cli, running_daemon, wait_until

pytestmark = pytest.mark.timeout(240)

CONFIG = """
[services.extra]
chatty = "tests.cli.control_fixtures:ChattyService"
pair = "tests.cli.control_fixtures:pair_factory"

[planning.planners]
scripted = "tests.actors.planning.adapters:ScriptedPlanner"

[planning.executors]
gated = "tests.daemon.children_fixtures:GatedExecutor"
"""
ROOT_LINE = (
    "phloem: 'phloem' is the tree's root: stop the daemon with `phloem stop` [not_controllable]"
)
START_S = 90.0  # plan runs and their callback children starting on a loaded machine


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(CONFIG) as d:
        yield d


def cli(daemon: DaemonProc, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--socket", str(daemon.socket), timeout=120)


def cli_json(daemon: DaemonProc, *args: str) -> Any:
    done = cli(daemon, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def node(snapshot: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The node at `path` below the root (ids `/`-separated), or None."""
    (current,) = snapshot["roots"]
    for part in path.split("/"):
        found = [c for c in current["children"] if c["id"] == part]
        if not found:
            return None
        current = found[0]
    return current


def test_stop_start_restart_a_service_by_its_path(daemon: DaemonProc) -> None:
    before = node(cli_json(daemon, "tree"), "chatty")
    assert before is not None and before["state"] == "running"
    done = cli(daemon, "stop", "chatty")
    assert (done.returncode, done.stdout) == (0, "chatty: stopped\n"), done.stderr
    assert node(cli_json(daemon, "tree"), "chatty")["state"] == "stopped"  # type: ignore[index]
    assert "chatty  actor  stopped" in cli(daemon, "tree").stdout
    assert cli_json(daemon, "status")["stopped"] == ["chatty"]
    assert "stopped    chatty (by hand)" in cli(daemon, "status").stdout
    asked = cli(daemon, "send", "chatty", '{"say": "hi"}')
    assert asked.returncode == 1 and "[unknown_actor]" in asked.stderr
    again = cli(daemon, "stop", "chatty")
    assert again.returncode == 1 and again.stderr.splitlines() == [
        "phloem: chatty is not running [not_running]"
    ]
    started = cli_json(daemon, "start", "chatty")
    assert started["state"] == "running" and started["previous"] is None
    assert started["handle"] not in (None, before["handle"])
    assert cli_json(daemon, "status")["stopped"] == []
    twice = cli(daemon, "start", "chatty")
    assert twice.returncode == 1 and twice.stderr.splitlines() == [
        "phloem: chatty is already running [already_started]"
    ]
    restarted = cli_json(daemon, "restart", "chatty")
    assert restarted["previous"] == started["handle"]
    assert restarted["handle"] not in (None, started["handle"])
    assert node(cli_json(daemon, "tree"), "chatty")["handle"] == restarted["handle"]  # type: ignore[index]
    assert cli(daemon, "send", "chatty", '{"say": "back"}').stdout.strip() == '"said"'


def test_a_child_stopped_by_hand_stays_down_and_no_control_is_charged(
    daemon: DaemonProc,
) -> None:
    """`pair` is rest_for_one over first, second with intensity 1: ten controls would
    exceed it many times over if they counted, and a crash of `first` restarts the rest
    of the group, but not `second`, stopped by hand."""
    pair = node(cli_json(daemon, "tree"), "pair")
    assert pair is not None
    for _ in range(3):
        assert cli(daemon, "restart", "pair/second").returncode == 0
        assert cli(daemon, "stop", "pair/second").returncode == 0
        assert cli(daemon, "start", "pair/second").returncode == 0
    assert cli(daemon, "stop", "pair/second").returncode == 0
    first = node(cli_json(daemon, "tree"), "pair/first")
    assert first is not None
    assert cli(daemon, "send", "pair/first", '{"die": true}').stdout.strip() == '"dying"'
    wait_until(
        lambda: (
            node(cli_json(daemon, "tree"), "pair/first")["handle"] not in (None, first["handle"])
        ),  # type: ignore[index]
        timeout=60,
        what="pair/first restarted by its supervisor",
    )
    snap = cli_json(daemon, "tree")
    now = node(snap, "pair")
    assert now is not None and now["handle"] == pair["handle"]  # the supervisor lived on
    assert node(snap, "pair/first")["restarts"] == 1  # type: ignore[index]  # the crash, only
    second = node(snap, "pair/second")
    assert second is not None and (second["state"], second["restarts"]) == ("stopped", 0)
    assert cli_json(daemon, "status")["stopped"] == ["pair/second"]
    assert cli(daemon, "start", "pair/second").returncode == 0


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("stop", "nope"), "phloem: no supervisor's child at 'nope' [unknown_child]"),
        (
            ("restart", "chatty/deeper"),
            "phloem: no supervisor's child at 'chatty/deeper' [unknown_child]",
        ),
        (
            ("start", "planning/runs/planning-run-999"),
            "phloem: no supervisor's child at 'planning/runs/planning-run-999' [unknown_child]",
        ),
        (
            ("stop", "phloem"),
            ROOT_LINE,
        ),
        (
            ("restart", "/"),
            ROOT_LINE,
        ),
    ],
)
def test_unknown_paths_and_the_root_are_one_typed_line_and_exit_1(
    daemon: DaemonProc, args: tuple[str, ...], line: str
) -> None:
    done = cli(daemon, *args)
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (1, "", [line])
    as_json = cli(daemon, *args, "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["kind"] == line.rsplit("[", 1)[1].rstrip("]")


def test_a_path_is_needed_for_start_and_restart(daemon: DaemonProc) -> None:
    for action in ("start", "restart"):
        done = cli(daemon, action)
        assert done.returncode == 2 and "PATH" in done.stderr


def plan_run(daemon: DaemonProc, gate: Path) -> subprocess.Popen[str]:
    steps = [{"op": "gated", "gate": str(gate)}]
    return subprocess.Popen(
        [
            PY,
            "-m",
            "phloem",
            "plan",
            "run",
            "--planner",
            "scripted",
            "--executor",
            "gated",
            "--goal",
            '"hold"',
            "--planner-target",
            json.dumps({"steps": steps}),
            "--option",
            "callback_timeout_ms=600000",
            "--option",
            "timeout_ms=600000",
            "--socket",
            str(daemon.socket),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def runs_below(snapshot: dict[str, Any]) -> dict[str, tuple[str, list[tuple[str, int]]]]:
    """Each planning run: its handle and its process children's (handle, pid)."""
    runs = node(snapshot, "planning/runs")
    assert runs is not None
    return {
        r["id"]: (r["handle"], [(c["handle"], c["pid"]) for c in r["children"] if c["pid"]])
        for r in runs["children"]
    }


def test_restart_planning_service_leaves_the_active_runs_alone(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    procs = [plan_run(daemon, gate) for _ in range(2)]
    try:
        wait_until(
            lambda: (
                sum(1 for _, kids in runs_below(cli_json(daemon, "tree")).values() if kids) == 2
            ),
            timeout=START_S,
            what="two planning runs with their callback children",
        )
        before = cli_json(daemon, "tree")
        service = node(before, "planning/service")
        runs_sup = node(before, "planning/runs")
        assert service is not None and runs_sup is not None
        runs = runs_below(before)
        done = cli_json(daemon, "restart", "planning/service")
        assert done["path"] == "planning/service" and done["previous"] == service["handle"]
        after = cli_json(daemon, "tree")
        changed = {
            path: (node(before, path)["handle"], node(after, path)["handle"])  # type: ignore[index]
            for path in ("planning", "planning/runs", "planning/service")
        }
        print(f"incarnations (before, after): {changed}; runs {runs}")
        assert changed["planning/service"][1] not in (None, service["handle"])  # a new one
        assert changed["planning"][0] == changed["planning"][1]
        assert changed["planning/runs"] == (runs_sup["handle"], runs_sup["handle"])
        assert runs_below(after) == runs  # every run and callback child is the same
        assert all(pids_alive(pid) for _, kids in runs.values() for _, pid in kids)
        assert node(after, "planning/runs")["restarts"] == 0  # type: ignore[index]
    finally:
        gate.touch()
        outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, (out, err)  # the runs completed after the restart


def test_stopping_a_run_by_its_path_ends_it_and_it_is_gone(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    proc = plan_run(daemon, gate)
    try:
        wait_until(
            lambda: any(kids for _, kids in runs_below(cli_json(daemon, "tree")).values()),
            timeout=START_S,
            what="a planning run with its callback child",
        )
        [(run, (_, [(_, pid)]))] = [
            (r, v) for r, v in runs_below(cli_json(daemon, "tree")).items() if v[1]
        ]
        done = cli(daemon, "stop", f"planning/runs/{run}")
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"planning/runs/{run}: stopped (a dynamic child: its spec is gone)\n"
        assert run not in runs_below(cli_json(daemon, "tree"))
        wait_until(lambda: not pids_alive(pid), timeout=60, what="its callback child ended")
        again = cli(daemon, "start", f"planning/runs/{run}")
        assert again.returncode == 1 and "[unknown_child]" in again.stderr
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (out, err)  # its client is told the run did not complete
    finally:
        gate.touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)


def test_the_python_clients_control_children_too(daemon: DaemonProc) -> None:
    with phloem.Client.connect(daemon.socket) as client:
        stopped = client.stop_child("chatty")
        assert stopped.state == "stopped" and stopped.handle is None
        with pytest.raises(PhloemError) as info:
            client.stop_child("chatty")
        assert info.value.kind == "not_running"
        assert client.start_child("chatty").state == "running"

    async def aio() -> tuple[str, str, str]:
        async with await AsyncClient.connect(daemon.socket) as client:
            restarted = await client.restart_child("chatty")
            stopped = await client.stop_child("chatty")
            started = await client.start_child("chatty")
            try:
                await client.stop_child("missing")
            except PhloemError as err:
                return restarted.state, stopped.state + "/" + started.state, err.kind
        raise AssertionError("stop_child('missing') did not fail")

    assert asyncio.run(aio()) == ("running", "stopped/running", "unknown_child")


def test_an_embedded_tree_controls_children_and_keeps_no_log_lines() -> None:
    with phloem.Tree.start() as tree, tree.client() as client:
        assert client.stop_child("echo").state == "stopped"
        assert client.restart_child("echo").state == "running"
        with pytest.raises(PhloemError) as info:
            client.logs()
        assert info.value.kind == "unsupported"
