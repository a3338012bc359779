"""Process children: start, ready, stop, and the exit reason of every way a child ends."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.protocols.secrets import REDACTED
from phloem.supervision import leftovers
from phloem.supervision.handle import ChildStartError, ChildState
from phloem.supervision.process import READY_TIMEOUT_RANGE, ProcessHandle, start_process
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import Command, Limits, ProcessTarget
from tests.supervision import process_targets as targets
from tests.supervision.process_fixtures import lean_fork_server  # noqa: F401

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("lean_fork_server")]


@pytest.fixture
def started() -> Iterator[list[ProcessHandle]]:
    handles: list[ProcessHandle] = []
    yield handles
    for h in handles:
        h.stop(0)


def test_a_target_is_running_with_a_pid_once_start_returns(
    started: list[ProcessHandle],
) -> None:
    h = start_process(ProcessTarget(targets.run_forever), name="worker")
    started.append(h)
    assert h.kind == "process"
    assert h.name == "worker"
    assert h.handle_id.startswith("process-")
    assert h.pid > 0 and h.pid != os.getpid()
    assert h.is_alive() and h.state is ChildState.RUNNING
    assert os.getpgid(h.pid) == h.pid  # its own process group
    stats = h.stats()
    assert stats.pid == h.pid
    assert stats.rss_bytes is not None and stats.rss_bytes > 0
    assert h.exit_reason is None


def test_stop_ends_a_target_with_shutdown_and_runs_exit_callbacks_once() -> None:
    h = start_process(ProcessTarget(targets.run_forever), name="worker")
    seen: list[ExitReason] = []
    done = threading.Event()

    def on_exit(reason: ExitReason) -> None:
        seen.append(reason)
        done.set()

    h.add_exit_callback(on_exit)
    terminated = ExitReason(ExitKind.SHUTDOWN, signal=signal.SIGTERM)
    assert h.stop(5) == terminated
    assert done.wait(5)
    assert h.stop(5) == terminated  # stopping again returns the same reason
    assert seen == [terminated]
    assert not h.is_alive() and h.state is ChildState.EXITED
    assert h.stats().rss_bytes is None


def test_a_target_that_returns_ends_normal() -> None:
    h = start_process(ProcessTarget(os.getpid), name="quick")
    assert h.wait(10) == ExitReason(ExitKind.NORMAL, exit_code=0)


def test_a_lambda_target_runs_too() -> None:
    h = start_process(ProcessTarget(lambda: sys.exit(0)), name="lambda")
    assert h.wait(10) == ExitReason(ExitKind.NORMAL, exit_code=0)


def test_an_exception_comes_back_with_its_type_and_a_redacted_message() -> None:
    h = start_process(ProcessTarget(targets.raise_secret), name="failing")
    reason = h.wait(10)
    assert reason is not None
    assert reason.kind is ExitKind.EXCEPTION
    assert reason.error_type == "ValueError"
    assert reason.message is not None
    assert "sk-ABCDEFGHIJ" not in reason.message
    assert REDACTED in reason.message
    assert reason.message.startswith("upstream said api_key=")


def test_a_nonzero_exit_is_an_exit_status_exception() -> None:
    h = start_process(ProcessTarget(targets.sleep_then_exit, (0, 3)), name="exit3")
    assert h.wait(10) == ExitReason(
        ExitKind.EXCEPTION, error_type="ExitStatus", detail="exit status 3", exit_code=3
    )


def test_an_external_sigkill_is_noticed_as_killed_by_signal_9(
    started: list[ProcessHandle],
) -> None:
    h = start_process(ProcessTarget(targets.run_forever), name="victim")
    os.kill(h.pid, signal.SIGKILL)
    assert h.wait(10) == ExitReason(ExitKind.KILLED, detail="signal 9", signal=9)


def test_an_external_sigterm_is_killed_by_signal_15_not_shutdown() -> None:
    h = start_process(ProcessTarget(targets.run_forever), name="victim")
    os.kill(h.pid, signal.SIGTERM)
    assert h.wait(10) == ExitReason(ExitKind.KILLED, detail="signal 15", signal=15)


def test_a_child_exiting_on_its_own_after_sigterm_is_shutdown_with_its_exit_code() -> None:
    h = start_process(ProcessTarget(targets.exit_on_sigterm, (5,), pass_channel=True), name="tidy")
    assert h.recv(timeout=5) == "armed"
    reason = h.stop(5)
    assert reason == ExitReason(ExitKind.SHUTDOWN, exit_code=5)
    assert (reason.exit_code, reason.signal) == (5, None)


def test_reasons_not_from_a_reported_exit_carry_neither_exit_code_nor_signal() -> None:
    assert ExitReason.normal().exit_code is None and ExitReason.normal().signal is None
    with pytest.raises(ChildStartError) as info:
        start_process(Command(["/nonexistent/phloem-test-binary"]), name="missing")
    assert (info.value.reason.exit_code, info.value.reason.signal) == (None, None)


def test_stop_escalates_to_kill_for_a_child_ignoring_sigterm() -> None:
    h = start_process(ProcessTarget(targets.serve, pass_channel=True), name="stubborn")
    assert h.request({"op": "ignore_sigterm"}, timeout=5) == "armed"
    assert h.stop(0.2) == ExitReason(ExitKind.KILLED, detail="stop timeout", signal=9)


def test_stop_zero_and_kill_kill_at_once() -> None:
    a = start_process(ProcessTarget(targets.run_forever), name="a")
    b = start_process(ProcessTarget(targets.run_forever), name="b")
    assert a.stop(0) == ExitReason(ExitKind.KILLED, signal=signal.SIGKILL)
    b.kill()
    assert b.wait(10) == ExitReason(ExitKind.KILLED, signal=signal.SIGKILL)


def test_stop_timeout_is_validated(started: list[ProcessHandle]) -> None:
    h = start_process(ProcessTarget(targets.run_forever), name="v")
    started.append(h)
    with pytest.raises(ValueError, match=r"^invalid_argument: timeout must be at least 0$"):
        h.stop(-1)
    with pytest.raises(ValueError, match=r"^invalid_argument: timeout must be at least 0$"):
        h.stop(float("nan"))
    with pytest.raises(TypeError, match=r"^invalid_argument: timeout must be a number$"):
        h.stop("1")  # type: ignore[arg-type]
    assert h.is_alive()


def test_a_command_runs_with_added_environment_and_cwd(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    script = f'printf "%s %s %s" "$PHLOEM_TEST_VALUE" "$(pwd)" "${{HOME:+home}}" > {out}'
    h = start_process(
        Command(["sh", "-c", script], env={"PHLOEM_TEST_VALUE": "added"}, cwd=str(tmp_path)),
        name="cmd",
    )
    assert h.wait(10) == ExitReason(ExitKind.NORMAL, exit_code=0)
    value, cwd, home = out.read_text().split(" ")
    assert value == "added"
    assert Path(cwd).resolve() == tmp_path.resolve()
    assert home == ("home" if os.environ.get("HOME") else "")


def test_a_command_exiting_nonzero_reports_its_status() -> None:
    h = start_process(Command(["sh", "-c", "exit 7"]), name="cmd")
    assert h.wait(10) == ExitReason(
        ExitKind.EXCEPTION, error_type="ExitStatus", detail="exit status 7", exit_code=7
    )


def test_stopping_a_command_is_shutdown() -> None:
    h = start_process(Command(["sleep", "300"]), name="sleeper")
    assert h.is_alive()
    assert h.stop(5) == ExitReason(ExitKind.SHUTDOWN, signal=signal.SIGTERM)


def test_a_missing_executable_is_a_start_error_with_a_clear_message() -> None:
    with pytest.raises(ChildStartError) as info:
        start_process(Command(["phloem-no-such-executable"]), name="missing")
    reason = info.value.reason
    assert reason.kind is ExitKind.EXCEPTION
    assert reason.error_type == "FileNotFoundError"
    assert reason.message == "cannot execute 'phloem-no-such-executable': not found"
    assert info.value.child_id == "missing"


def test_a_missing_cwd_is_a_start_error(tmp_path: Path) -> None:
    with pytest.raises(ChildStartError) as info:
        start_process(Command(["true"], cwd=str(tmp_path / "nope")), name="nocwd")
    assert info.value.reason.error_type == "FileNotFoundError"
    assert "cannot change directory" in (info.value.reason.message or "")


def test_a_target_that_cannot_be_pickled_is_a_start_error() -> None:
    generator = (x for x in range(3))
    with pytest.raises(ChildStartError) as info:
        start_process(ProcessTarget(print, (generator,)), name="unpicklable")
    assert info.value.reason.kind is ExitKind.EXCEPTION
    assert info.value.reason.error_type == "TypeError"


def test_a_child_not_ready_in_time_is_a_timeout_start_error() -> None:
    slow = ProcessTarget(print, (targets.SlowToLoad(30),))
    with pytest.raises(ChildStartError) as info:
        start_process(slow, name="slow", ready_timeout=0.5)
    assert info.value.reason == ExitReason.timeout("not ready within 0.5s")
    assert info.value.child_id == "slow"


def test_start_arguments_are_validated() -> None:
    target = ProcessTarget(targets.run_forever)
    hi = READY_TIMEOUT_RANGE[1]
    with pytest.raises(
        ValueError, match=r"^invalid_argument: ready_timeout must be between 0.001 and 3600$"
    ):
        start_process(target, name="x", ready_timeout=0)
    with pytest.raises(ValueError, match=r"^invalid_argument: ready_timeout must be between"):
        start_process(target, name="x", ready_timeout=hi * 2)
    with pytest.raises(TypeError, match=r"^invalid_argument: ready_timeout must be a number$"):
        start_process(target, name="x", ready_timeout=True)
    with pytest.raises(TypeError, match=r"^start must be a ProcessTarget or a Command$"):
        start_process("sleep", name="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^limits must be a Limits or None$"):
        start_process(target, name="x", limits={"max_open_files": 10})  # type: ignore[arg-type]


def test_limits_are_validated_at_their_edges() -> None:
    from phloem.supervision.spec import (
        MAX_CPU_SECONDS_RANGE,
        MAX_OPEN_FILES_RANGE,
        MIN_MEMORY_BYTES,
    )

    assert Limits(max_memory_bytes=MIN_MEMORY_BYTES).max_memory_bytes == MIN_MEMORY_BYTES
    with pytest.raises(
        ValueError,
        match=rf"^invalid_argument: max_memory_bytes must be at least {MIN_MEMORY_BYTES}$",
    ):
        Limits(max_memory_bytes=MIN_MEMORY_BYTES - 1)
    with pytest.raises(TypeError, match=r"^invalid_argument: max_memory_bytes must be an int$"):
        Limits(max_memory_bytes=float(MIN_MEMORY_BYTES))  # type: ignore[arg-type]
    lo, hi = MAX_OPEN_FILES_RANGE
    assert Limits(max_open_files=lo).max_open_files == lo
    assert Limits(max_open_files=hi).max_open_files == hi
    for bad in (lo - 1, hi + 1):
        with pytest.raises(
            ValueError, match=rf"^invalid_argument: max_open_files must be between {lo} and {hi}$"
        ):
            Limits(max_open_files=bad)
    lo, hi = MAX_CPU_SECONDS_RANGE
    assert Limits(max_cpu_seconds=lo).max_cpu_seconds == lo
    for bad in (lo - 1, hi + 1):
        with pytest.raises(
            ValueError, match=rf"^invalid_argument: max_cpu_seconds must be between {lo} and {hi}$"
        ):
            Limits(max_cpu_seconds=bad)
    with pytest.raises(TypeError, match=r"^invalid_argument: max_cpu_seconds must be an int$"):
        Limits(max_cpu_seconds=True)


def test_many_threads_can_start_and_stop_children_at_once() -> None:
    errors: list[BaseException] = []
    pids: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            for _ in range(5):
                h = start_process(ProcessTarget(targets.echo, pass_channel=True), name="par")
                assert h.request(h.pid, timeout=10) == h.pid
                with lock:
                    pids.append(h.pid)
                assert h.stop(5).kind == "shutdown"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(25)
    assert not errors
    assert len(set(pids)) == 30


def test_children_see_the_daemons_environment_as_it_is_when_they_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start_process(ProcessTarget(os.getpid), name="warm").wait(10)  # server already up
    monkeypatch.setenv("PHLOEM_TEST_LATE_VAR", "late")
    h = start_process(ProcessTarget(targets.serve, pass_channel=True), name="env")
    try:
        assert h.request({"op": "env", "name": "PHLOEM_TEST_LATE_VAR"}, timeout=5) == "late"
    finally:
        h.stop(0)
    out = start_process(Command(["sh", "-c", 'test "$PHLOEM_TEST_LATE_VAR" = late']), name="c")
    assert out.wait(10) == ExitReason(ExitKind.NORMAL, exit_code=0)


def test_a_stop_whose_kill_is_never_reported_ends_at_the_reap_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lost exit report (signals that do nothing here) must not hang stop()."""
    from phloem.supervision import process

    monkeypatch.setattr(process, "KILL_REAP_TIMEOUT_S", 0.2)
    h = start_process(ProcessTarget(targets.run_forever), name="unkillable")
    monkeypatch.setattr(h, "_signal_tree", lambda sig, group_only=False: None)
    reason = h.stop(timeout=0.1)
    assert reason.kind == "killed" and reason.detail == "no exit report after kill"
    assert (reason.exit_code, reason.signal) == (None, None)  # no wait status was reported
    os.kill(h.pid, signal.SIGKILL)  # the child really is still there: end it
    assert leftovers.wait_gone([h.pid], 10)
