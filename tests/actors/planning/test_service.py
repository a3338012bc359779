"""Planning through a real daemon socket, the CLI, the embedded tree and the README."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import phloem
from phloem.client import AsyncClient, Client
from phloem.config import parse_config
from phloem.protocols.result import decode_result
from tests.actors.planning.conftest import read_pids
from tests.helpers import ROOT, DaemonProc, raises_kind, running_daemon

pytestmark = pytest.mark.timeout(60)

CONFIG = """
[planning.planners]
scripted = "tests.actors.planning.adapters:ScriptedPlanner"
report = "phloem.examples.planning_report:ReportPlanner"
[planning.executors]
scripted = "tests.actors.planning.adapters:ScriptedExecutor"
readonly_tools = "phloem.examples.planning_report:ReadOnlyToolsExecutor"
"""


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(CONFIG) as daemon:
        yield daemon


@pytest.fixture
def client(daemon: DaemonProc) -> Iterator[Client]:
    with Client.connect(daemon.socket) as c:
        yield c


def sleeper(fifo: str) -> dict[str, Any]:
    return {"name": "scripted", "target": {"steps": [{"op": "sleep", "fifo": fifo}]}}


# --- the reference's API cases, over the socket -----------------------------------------


def test_sync_run_with_defaults_completes(client: Client) -> None:
    result = client.run_planning("scripted", "scripted", {"task": "t"})
    assert result.status == "completed" and result.error is None
    assert result.metadata == {} and result.steps_executed == 1


def test_sync_run_with_options_prunes_result_metadata(client: Client) -> None:
    options = {"max_steps": 4, "result_metadata": {"run": "42", "api_key": "sk-x"}}
    result = client.run_planning("scripted", "scripted", {"task": "t"}, {"n": 1}, options)
    assert result.status == "completed" and result.metadata == {"run": "42"}


def test_async_cancel_then_await(daemon: DaemonProc, tmp_path: Path) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)

    async def scenario() -> Any:
        async with await AsyncClient.connect(daemon.socket) as client:
            ref = await client.start_planning(sleeper(fifo), "scripted", 1)
            [pid] = await asyncio.to_thread(read_pids, fifo)
            assert await client.cancel_planning(ref, "user_requested") is True
            result = await client.await_planning(ref, 5)
            return pid, result

    pid, result = asyncio.run(scenario())
    assert result.status == "cancelled"
    assert result.error.to_builtins() == {"kind": "cancelled", "reason": "user_requested"}
    assert not psutil.pid_exists(pid)


def test_await_with_timeout_zero_is_a_timeout_error(client: Client, tmp_path: Path) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    ref = client.start_planning(sleeper(fifo), "scripted", 1)
    read_pids(fifo)
    assert raises_kind(client.await_planning, ref, 0) == "planning_await_timeout"
    assert client.cancel_planning(ref) is True
    assert client.await_planning(ref, 5).status == "cancelled"


def test_a_foreign_owner_gets_not_planning_owner_for_await_and_cancel(
    daemon: DaemonProc, client: Client, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    ref = client.start_planning(sleeper(fifo), "scripted", 1)
    read_pids(fifo)
    with Client.connect(daemon.socket) as other:
        assert raises_kind(other.await_planning, ref, 0) == "not_planning_owner"
        assert raises_kind(other.cancel_planning, ref) == "not_planning_owner"
    client.cancel_planning(ref)
    assert client.await_planning(ref, 5).status == "cancelled"


@pytest.mark.parametrize("ref", ["garbage", "plan_123", "ref_" + "0" * 32, "", "plan_" + "G" * 32])
def test_malformed_refs_fail_explicitly(client: Client, ref: str) -> None:
    assert raises_kind(client.await_planning, ref, 0) == "invalid_planning_ref"
    assert raises_kind(client.cancel_planning, ref) == "invalid_planning_ref"


def test_configuration_errors_come_back_before_anything_starts(client: Client) -> None:
    assert raises_kind(client.start_planning, "nope", "scripted", 1) == "invalid_planning_adapter"
    assert (
        raises_kind(client.start_planning, "scripted", "os:system", 1) == "invalid_planning_adapter"
    )
    opts = {"max_heap_words": 500_000}
    assert raises_kind(client.start_planning, "scripted", "scripted", 1, None, opts) == (
        "invalid_planning_options"
    )


def test_events_stream_over_the_socket(client: Client) -> None:
    events: list[str] = []
    result = client.run_planning(
        "scripted", "scripted", 1, on_event=lambda e: events.append(e.kind)
    )
    assert result.status == "completed"
    assert events == ["plan_accepted", "step_started", "observation", "terminal"]


def test_owner_disconnect_kills_the_active_worker_and_ends_the_run(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    client = Client.connect(daemon.socket)
    client.start_planning(sleeper(fifo), "scripted", 1)
    [pid] = read_pids(fifo)
    worker = psutil.Process(pid)
    client.close()
    worker.wait(timeout=10)
    assert not psutil.pid_exists(pid)
    event = daemon.wait_event("planning_run_abandoned")
    assert event["reason"] == "owner_down"


@pytest.mark.timeout(90)
def test_two_hundred_concurrent_runs_in_one_daemon_all_reach_a_terminal_result(
    daemon: DaemonProc,
) -> None:
    clients = [Client.connect(daemon.socket) for _ in range(4)]
    try:
        refs = [
            (c, c.start_planning("scripted", "scripted", i)) for i in range(50) for c in clients
        ]
        results = [c.await_planning(ref, 60) for c, ref in refs]
    finally:
        for c in clients:
            c.close()
    assert [r.status for r in results] == ["completed"] * 200
    assert {r.result["step"] for r in results} == {"s1"}


# --- CLI ----------------------------------------------------------------------------------


def cli(daemon: DaemonProc, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "phloem", *args, "--socket", str(daemon.socket)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_plan_run_prints_progress_and_the_result(daemon: DaemonProc) -> None:
    out = cli(
        daemon,
        "plan",
        "run",
        "--planner",
        "report",
        "--executor",
        "readonly_tools",
        "--executor-target",
        json.dumps({"root": str(ROOT)}),
        "--goal",
        '{"report": "repository"}',
        "--option",
        "max_steps=8",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["event"] for e in lines[:2]] == ["plan_accepted", "step_started"]
    result = decode_result(json.dumps(lines[-1]))
    assert result.status == "completed" and result.steps_executed == 4
    readme = result.observations[-1].to_builtins()["output"]
    assert readme["path"] == "README.md"
    assert readme["content"].splitlines()[0].split("\t", 1)[1] == "# phloem"


def test_cli_plan_run_replans_when_the_readme_is_missing(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "main.py").write_text("# TODO: everything\n")
    out = cli(
        daemon,
        "plan",
        "run",
        "--planner",
        "report",
        "--executor",
        "readonly_tools",
        "--executor-target",
        json.dumps({"root": str(tmp_path)}),
        "--goal",
        "{}",
    )
    assert out.returncode == 0, out.stderr
    assert "replan: repository-report revision 1 [project-file]" in out.stdout
    assert "status: completed" in out.stdout


def test_cli_plan_start_takes_cancel_and_await_on_stdin(daemon: DaemonProc) -> None:
    goal = json.dumps(1)
    target = json.dumps({"plan": "steps", "steps": [{"op": "sleep", "s": 30}]})
    out = cli(
        daemon,
        "plan",
        "start",
        "--planner",
        "scripted",
        "--planner-target",
        target,
        "--executor",
        "scripted",
        "--goal",
        goal,
        "--json",
        stdin="cancel stop now\nawait 5\n",
    )
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert re.fullmatch(r"plan_[0-9a-f]{32}", lines[0]["ref"])
    assert lines[1] == {"cancelled": True}
    assert lines[2]["status"] == "cancelled" and out.returncode == 1


def test_cli_plan_validate_checks_a_document(daemon: DaemonProc, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            {
                "id": "p",
                "revision": 0,
                "goal": 1,
                "steps": [{"id": "a", "description": "d", "action": {}}],
            }
        )
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "p", "ID": "q", "revision": 0, "goal": 1, "steps": []}')
    ok = cli(daemon, "plan", "validate", str(good))
    assert ok.returncode == 0 and ok.stdout.startswith("valid: plan 'p' revision 0, 1 steps")
    no = cli(daemon, "plan", "validate", str(bad), "--json")
    assert no.returncode == 1
    assert json.loads(no.stdout)["kind"] == "duplicate_plan_field"


# --- embedded tree and README --------------------------------------------------------------


def test_tree_clients_are_separate_owners() -> None:
    with phloem.Tree.start(parse_config(CONFIG)) as tree:
        a, b = tree.client(), tree.client()
        ref = a.start_planning("scripted", "scripted", 1)
        assert raises_kind(b.await_planning, ref, 5) == "not_planning_owner"
        assert a.await_planning(ref, 10).status == "completed"
        assert raises_kind(a.await_planning, ref, 0) == "not_planning_owner"  # handed out once


def test_a_tree_without_planning_config_says_planning_is_unavailable() -> None:
    with phloem.Tree.start(parse_config("")) as tree, tree.client() as client:
        assert (
            raises_kind(client.start_planning, "scripted", "scripted", 1) == "planning_unavailable"
        )


def test_the_make_run_workload_completes() -> None:
    import io

    from phloem.examples.planning_report import run_workload

    out = io.StringIO()
    with phloem.Tree.start(parse_config(CONFIG)) as tree, tree.client() as client:
        assert run_workload(client, str(ROOT), out) is True
    assert "plan_accepted: repository-report revision 0" in out.getvalue()
    assert "status: completed" in out.getvalue()


def test_plan_run_numbers_the_steps_and_says_retry_only_for_a_failed_step_run_again(
    daemon: DaemonProc,
) -> None:
    target = {
        "steps": [{"op": "echo", "value": 1}, {"op": "fail"}],
        "review": "replan_on_error",
        "recovery": [{"op": "echo", "value": 2}, {"op": "echo", "value": 3}],
    }
    args = ["plan", "run", "--planner", "scripted", "--executor", "scripted", "--goal", "1"]
    out = cli(daemon, *args, "--planner-target", json.dumps(target))
    assert out.returncode == 0, out.stderr
    started = [line for line in out.stdout.splitlines() if line.startswith("step ")]
    assert started == [
        "step 1: s1 (plan revision 0)",
        "step 2: s2 (plan revision 0)",
        "step 3: s1 (plan revision 1)",
        "step 4: s2 (retry 1, plan revision 1)",
    ]
    assert "attempt" not in out.stdout


def test_cli_reports_configuration_errors_in_one_line(daemon: DaemonProc) -> None:
    out = cli(daemon, "plan", "run", "--planner", "nope", "--executor", "scripted", "--goal", "1")
    assert out.returncode == 1 and out.stdout == ""
    assert "invalid_planning_adapter" in out.stderr and len(out.stderr.splitlines()) == 1
    bad = cli(
        daemon, "plan", "run", "--planner", "scripted", "--executor", "scripted", "--goal", "{"
    )
    assert bad.returncode == 2 and "--goal must be JSON" in bad.stderr
