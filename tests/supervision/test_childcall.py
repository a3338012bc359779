"""call_in_child: a function computed in a capped process child, or a typed failure."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from phloem.protocols.errors import PhloemError
from phloem.protocols.secrets import REDACTED
from phloem.supervision import forkserver
from phloem.supervision.childcall import CallControl, ChildCallError, call_in_child
from phloem.supervision.handle import ChildHandle, ChildStartError
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import Limits, ProcessTarget
from tests.supervision import process_targets as targets
from tests.supervision.process_fixtures import lean_fork_server  # noqa: F401

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("lean_fork_server")]

MiB = 1024 * 1024


def gone(pid: int | None) -> bool:
    assert pid is not None
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_value_comes_back_and_the_child_is_gone() -> None:
    control = CallControl()
    assert call_in_child(targets.double, 21, name="double", timeout=10, control=control) == 42
    assert control.pid is not None and gone(control.pid)
    value = {"a": [1, 2.5, None], "b": b"\x00"}
    assert call_in_child(targets.double, [value], name="list", timeout=10) == [value, value]


def test_an_exception_in_the_child_is_child_exited_with_the_redacted_reason() -> None:
    with pytest.raises(ChildCallError) as info:
        call_in_child(targets.fail_with, targets.SECRET_MESSAGE, name="failing", timeout=10)
    err = info.value
    assert isinstance(err, PhloemError) and err.kind == "child_exited"
    reason = err.reason
    assert reason is not None and reason.kind is ExitKind.EXCEPTION
    assert reason.error_type == "ValueError"
    assert reason.message is not None and REDACTED in reason.message
    assert "sk-ABCDEFGHIJ" not in err.message
    assert reason.exit_code == 70 and reason.signal is None  # the child's own exit status
    assert gone(err.pid)


def test_a_child_over_its_heap_cap_is_child_exited_with_heap_exceeded() -> None:
    with pytest.raises(ChildCallError) as info:
        call_in_child(
            targets.allocate,
            1024 * MiB,
            name="greedy",
            limits=Limits(max_memory_bytes=64 * MiB),
            timeout=10,
        )
    assert info.value.kind == "child_exited"
    assert info.value.reason is not None
    assert info.value.reason.kind is ExitKind.HEAP_EXCEEDED


def test_no_answer_within_the_timeout_is_child_timeout_and_the_child_is_killed() -> None:
    started = time.monotonic()
    with pytest.raises(ChildCallError) as info:
        call_in_child(time.sleep, 30, name="slow", timeout=0.5)
    assert time.monotonic() - started < 10
    err = info.value
    assert err.kind == "child_timeout"
    assert err.reason == ExitReason(ExitKind.KILLED, signal=9)
    assert gone(err.pid)


def test_a_start_that_fails_is_child_start_failed() -> None:
    def refuse(target: ProcessTarget, ready_timeout: float) -> ChildHandle:
        raise ChildStartError(ExitReason(ExitKind.EXCEPTION, error_type="OSError"), "x")

    with pytest.raises(ChildCallError) as info:
        call_in_child(targets.double, 1, name="refused", start=refuse)
    assert info.value.kind == "child_start_failed"
    assert info.value.reason is not None and info.value.reason.error_type == "OSError"


def test_a_start_that_times_out_is_child_timeout() -> None:
    def late(target: ProcessTarget, ready_timeout: float) -> ChildHandle:
        raise ChildStartError(ExitReason.timeout("not ready"), "x")

    with pytest.raises(ChildCallError) as info:
        call_in_child(targets.double, 1, name="late", start=late, timeout=1)
    assert info.value.kind == "child_timeout" and info.value.pid is None


def test_cancel_kills_a_running_call_and_it_raises_child_cancelled() -> None:
    control = CallControl()
    errors: list[ChildCallError] = []

    def call() -> None:
        try:
            call_in_child(time.sleep, 30, name="cancelled", timeout=20, control=control)
        except ChildCallError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 10
    while control.pid is None and time.monotonic() < deadline:
        time.sleep(0.01)
    control.cancel(wait=5)
    assert gone(control.pid)
    thread.join(10)
    [err] = errors
    assert err.kind == "child_cancelled"


def test_a_call_cancelled_before_it_starts_starts_nothing() -> None:
    control = CallControl()
    control.cancel()

    def never(target: ProcessTarget, ready_timeout: float) -> ChildHandle:
        raise AssertionError("started")

    with pytest.raises(ChildCallError) as info:
        call_in_child(targets.double, 1, name="never", control=control, start=never)
    assert info.value.kind == "child_cancelled" and control.pid is None


def test_a_call_whose_fork_server_dies_is_child_server_lost_and_the_next_one_runs() -> None:
    control = CallControl()
    errors: list[ChildCallError] = []

    def call() -> None:
        try:
            call_in_child(time.sleep, 30, name="lost", control=control, timeout=60)
        except ChildCallError as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 30
    while control.pid is None and time.monotonic() < deadline:
        time.sleep(0.01)
    server = forkserver.server_pid()
    assert control.pid is not None and server is not None
    os.kill(server, signal.SIGKILL)
    caller.join(30)
    [error] = errors
    assert error.kind == "child_server_lost", error
    assert error.reason is not None and error.reason.server_lost
    assert call_in_child(targets.double, 21, name="next", timeout=30) == 42
    assert forkserver.server_pid() not in (None, server)
