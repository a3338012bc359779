from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import psutil
import pytest

from phloem.tools import OutputPolicy, ToolContext, Workspace
from phloem.tools.bash import BashTool
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(30)


def _processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(marker in part for part in cmdline):
            found.append(proc)
    return found


def test_stdout_stderr_and_exit_code_come_back(ctx: ToolContext) -> None:
    result = BashTool().run({"command": "echo out; echo err >&2; exit 3"}, ctx)
    assert (result["stdout"], result["stderr"], result["exit_code"]) == ("out\n", "err\n", 3)
    assert (result["signal"], result["timed_out"], result["killed"]) == ("", False, False)


def test_the_environment_has_the_non_interactive_additions(ctx: ToolContext, root: Path) -> None:
    (root / "sub").mkdir()
    result = BashTool().run(
        {"command": 'echo "$TERM $PAGER $GIT_PAGER $NO_COLOR $PWD"; pwd; cat', "dir": "sub"}, ctx
    )
    real = os.path.realpath(root / "sub")
    assert result["stdout"] == f"dumb cat cat 1 {real}\n{real}\n"  # cat read an empty stdin
    assert result["exit_code"] == 0


def test_a_timeout_kills_the_whole_group_and_leaves_no_process_behind(ctx: ToolContext) -> None:
    marker = f"phloem-{uuid.uuid4().hex}"
    command = (
        f"bash -c 'exec -a {marker}-a sleep 300' & "
        f"setsid bash -c 'exec -a {marker}-b sleep 300' & "
        "trap '' TERM; wait; wait"
    )
    result = BashTool(kill_grace_s=0.3).run({"command": command, "timeout_ms": 500}, ctx)
    assert result["timed_out"] is True
    assert result["exit_code"] == -1
    assert result["signal"] in ("SIGTERM", "SIGKILL")
    assert _processes_with(marker) == []


def test_a_command_ignoring_sigterm_is_killed_after_the_grace(ctx: ToolContext) -> None:
    result = BashTool(kill_grace_s=0.2).run(
        {"command": "trap '' TERM; while :; do sleep 0.05; done", "timeout_ms": 200}, ctx
    )
    assert (result["timed_out"], result["killed"], result["signal"]) == (True, True, "SIGKILL")


def test_a_command_exiting_on_its_own_after_sigterm_reports_its_exit_code(
    ctx: ToolContext,
) -> None:
    result = BashTool(kill_grace_s=5).run(
        {"command": "trap 'exit 7' TERM; sleep 30 & wait", "timeout_ms": 1000}, ctx
    )
    assert (result["timed_out"], result["killed"]) == (True, False)
    assert (result["exit_code"], result["signal"]) == (7, "")


def test_background_jobs_left_by_a_finished_command_are_killed(ctx: ToolContext) -> None:
    marker = f"phloem-{uuid.uuid4().hex}"
    result = BashTool().run({"command": f"(exec -a {marker} sleep 300) & echo started"}, ctx)
    assert result["stdout"] == "started\n"
    # Killed by the time run() returns; a busy fork server may take a moment to reap it.
    wait_until(lambda: _processes_with(marker) == [], 10, f"for {marker} to be gone")


def test_a_signalled_shell_reports_the_signal(ctx: ToolContext) -> None:
    result = BashTool().run({"command": "kill -9 $$"}, ctx)
    assert (result["exit_code"], result["signal"], result["killed"]) == (-1, "SIGKILL", False)


def test_large_output_is_limited_with_true_totals(root: Path) -> None:
    policy = OutputPolicy(max_bytes=100, max_lines=0, max_line_bytes=0, head_fraction=0.5)
    ctx = ToolContext(workspace=Workspace(root), policy=policy)
    result = BashTool().run({"command": "yes | head -c 1000000"}, ctx)
    report = result["stdout_report"]
    assert result["truncated"] is True
    assert (report["original_bytes"], report["original_lines"]) == (1_000_000, 500_000)
    assert report["kept_bytes"] == 100
    assert "bytes=100/1000000 lines=" in result["stdout"]


def test_the_working_directory_must_stay_in_the_workspace(ctx: ToolContext) -> None:
    assert BashTool().run({"command": "true", "dir": ".."}, ctx)["error"] == "outside_root"
    assert BashTool().run({"command": "true", "timeout_ms": 0}, ctx)["error"] == "arguments"


def test_cancelling_a_running_command_stops_it(ctx: ToolContext, root: Path) -> None:
    fifo = root / "started"
    os.mkfifo(fifo)
    marker = f"phloem-{uuid.uuid4().hex}"

    def cancel_once_started() -> None:
        with open(fifo) as handle:  # blocks until the command has started and written
            handle.read()
        ctx.cancel.set()

    watcher = threading.Thread(target=cancel_once_started)
    watcher.start()
    command = f"echo go > started; exec -a {marker} sleep 300"
    result = BashTool(kill_grace_s=0.2).run({"command": command, "timeout_ms": 20000}, ctx)
    watcher.join(5)
    assert result["error"] == "cancelled"
    assert _processes_with(marker) == []
