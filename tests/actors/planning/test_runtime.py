"""The planning runtime, in-process: the reference's 19 runtime cases and more.

Every callback here runs in a real capped process child from the fork server.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import psutil
import pytest

from phloem.actors.planning import AdapterRegistry, PlanningRuntime
from phloem.actors.planning.protocol import PlanningStreamItem
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.protocols.result import PlanningResult, decode_result, encode_result
from phloem.protocols.runs import RunEnd, RunEvent
from phloem.supervision.refs import Owner
from tests.actors.planning.conftest import on_ray, read_pids

pytestmark = pytest.mark.timeout(60)

MIB = 1024 * 1024


def scripted(**target: Any) -> dict[str, Any]:
    return {"name": "scripted", "target": target}


def run(
    rt: PlanningRuntime,
    owner: Owner,
    planner: Any,
    goal: Any = None,
    options: dict[str, Any] | None = None,
    context: Any = None,
) -> PlanningResult:
    result = rt.run(owner, planner, "scripted", goal or {"task": "t"}, context, options)
    # every result survives the strict codec
    assert decode_result(encode_result(result)) == result
    return result


def short_timeout_ms(rt: PlanningRuntime) -> int:
    """A callback timeout that a sleeping callback overruns, but that the callbacks after
    it (in a new child or worker) meet: on Ray a worker killed at a deadline may need a
    new one started, which takes longer than a fork."""
    return 2000 if on_ray(rt) else 300


def error_of(result: PlanningResult) -> dict[str, Any]:
    assert result.error is not None
    return result.error.to_builtins()


def obs_errors(result: PlanningResult) -> list[dict[str, Any]]:
    return [o.to_builtins().get("error", {}) for o in result.observations]


# --- completion and data ----------------------------------------------------------------


def test_simple_plan_completes_with_json_safe_history(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    steps = [{"op": "echo", "value": 1}, {"op": "echo", "value": [1.5, None]}]
    result = run(runtime, owner, scripted(steps=steps), context={"invocation_id": "run-42"})
    assert result.status == "completed" and result.error is None
    assert result.steps_executed == 2 and result.replans == 0
    assert result.plan is not None and result.plan.revision == 0
    assert [o.step_id for o in result.observations] == ["s1", "s2"]
    assert [o.attempt for o in result.observations] == [1, 2]
    assert result.result == result.observations[-1].output
    assert result.result["context"] == {"invocation_id": "run-42"}
    json.loads(encode_result(result))


def test_a_planner_may_return_a_plan_struct(runtime: PlanningRuntime, owner: Owner) -> None:
    result = run(runtime, owner, scripted(plan="struct"))
    assert result.status == "completed"
    assert result.plan is not None and result.plan.metadata == {"via": "struct"}


def test_model_supplied_code_in_an_action_is_only_echoed_data(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    code = f"__import__('os').system('touch {marker}')"
    steps = [{"op": "echo", "code": code, "module": "os", "function": "system"}]
    result = run(runtime, owner, scripted(steps=steps))
    assert result.status == "completed"
    assert result.result["action"]["code"] == code
    assert not marker.exists()


def test_replanning_recovers_from_a_step_failure(runtime: PlanningRuntime, owner: Owner) -> None:
    target = scripted(
        steps=[{"op": "fail"}],
        review="replan_on_error",
        recovery=[{"op": "echo", "value": "a"}, {"op": "echo", "value": "b"}],
    )
    result = run(runtime, owner, target)
    assert result.status == "completed"
    assert result.plan is not None
    assert result.plan.revision == 1 and len(result.plan.steps) == 2
    assert result.replans == 1 and result.steps_executed == 3
    first = result.observations[0].to_builtins()
    assert first["status"] == "error"
    assert first["error"] == {"kind": "executor_failed", "reason": {"why": "boom"}}


def test_max_steps_counts_every_executor_call_across_revisions(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    target = scripted(steps=[{"op": "echo"}], review="always_replan")
    result = run(runtime, owner, target, options={"max_steps": 3, "max_replans": 10})
    assert result.status == "failed"
    assert error_of(result) == {"kind": "max_steps_exceeded", "limit": 3}
    assert result.steps_executed == 3 and result.replans == 3
    assert result.plan is not None and result.plan.revision == 3


def test_max_replans_is_enforced(runtime: PlanningRuntime, owner: Owner) -> None:
    target = scripted(steps=[{"op": "echo"}], review="always_replan")
    result = run(runtime, owner, target, options={"max_replans": 2})
    assert error_of(result) == {"kind": "max_replans_exceeded", "limit": 2}
    assert result.replans == 2 and result.steps_executed == 3


def test_an_absolute_deadline_of_25_ms_ends_the_run_quickly(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    started = time.monotonic()
    result = run(runtime, owner, scripted(plan="sleep"), options={"timeout_ms": 25})
    assert time.monotonic() - started < 1.0
    assert result.status == "failed"
    assert error_of(result) == {"kind": "deadline_exceeded", "limit": 25}


def test_a_one_millisecond_deadline_still_ends_as_a_result(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    result = run(runtime, owner, scripted(), options={"timeout_ms": 1})
    assert result.status == "failed"
    assert error_of(result) == {"kind": "deadline_exceeded", "limit": 1}


def test_a_callback_timeout_is_a_reviewable_step_failure(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    target = scripted(
        steps=[{"op": "sleep", "s": 30}],
        review="replan_on_error",
        recovery=[{"op": "echo"}],
    )
    result = run(runtime, owner, target, options={"callback_timeout_ms": short_timeout_ms(runtime)})
    assert result.status == "completed" and result.replans == 1
    assert obs_errors(result)[0] == {
        "kind": "executor_callback_failed",
        "reason": "callback_timeout",
    }


# --- planner and executor failures are values -------------------------------------------


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("crash", {"kind": "planner_callback_failed", "reason": "callback_exception"}),
        ("sleep", {"kind": "planner_callback_failed", "reason": "callback_timeout"}),
        ("error", {"kind": "planner_failed", "reason": {"why": "cannot plan"}}),
        ("hog", {"kind": "planner_callback_failed", "reason": "callback_memory_exceeded"}),
    ],
)
def test_planner_crash_timeout_error_and_memory_are_values(
    runtime: PlanningRuntime, owner: Owner, mode: str, error: dict[str, Any]
) -> None:
    options = {"callback_timeout_ms": short_timeout_ms(runtime), "max_memory_bytes": 128 * MIB}
    result = run(runtime, owner, scripted(plan=mode), options=options)
    assert result.status == "failed" and result.plan is None
    assert error_of(result) == error


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        ("invalid", "invalid_planner_output"),
        ("opaque", "invalid_planner_output"),
        ("revision1", "invalid_initial_plan"),
        ("other_goal", "invalid_initial_plan"),
        ("dup_ids", "invalid_initial_plan"),
    ],
)
def test_invalid_initial_plans_are_values(
    runtime: PlanningRuntime, owner: Owner, mode: str, kind: str
) -> None:
    result = run(runtime, owner, scripted(plan=mode))
    assert result.status == "failed" and error_of(result)["kind"] == kind


def test_a_planner_may_complete_at_once_with_pruned_data(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    result = run(runtime, owner, scripted(plan="complete"), context={"session_token": "x", "n": 1})
    assert result.status == "completed" and result.steps_executed == 0
    assert result.result == {"done": True, "context": {"n": 1}}


def test_executor_crash_invalid_and_opaque_outputs_are_observations(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    steps = [{"op": "crash"}, {"op": "invalid"}, {"op": "opaque"}, {"op": "fail"}]
    result = run(runtime, owner, scripted(steps=steps))
    kinds = [e["kind"] for e in obs_errors(result)]
    assert kinds == [
        "executor_callback_failed",
        "invalid_executor_result",
        "invalid_executor_output",
        "executor_failed",
    ]
    assert obs_errors(result)[0]["reason"] == "callback_exception"
    assert obs_errors(result)[3]["reason"] == {"why": "boom"}  # the "token" key was pruned
    assert error_of(result) == {
        "kind": "step_failed",
        "reason": {"kind": "executor_failed", "reason": {"why": "boom"}},
    }


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("crash", {"kind": "planner_callback_failed", "reason": "callback_exception"}),
        ("sleep", {"kind": "planner_callback_failed", "reason": "callback_timeout"}),
        ("fail", {"kind": "planner_failed", "reason": {"because": "reviewer said so"}}),
    ],
)
def test_review_crash_timeout_and_fail_are_values(
    runtime: PlanningRuntime, owner: Owner, mode: str, error: dict[str, Any]
) -> None:
    options = {"callback_timeout_ms": short_timeout_ms(runtime)}
    result = run(runtime, owner, scripted(review=mode), options=options)
    assert result.status == "failed" and result.steps_executed == 1
    assert error_of(result) == error


@pytest.mark.parametrize(
    ("mode", "kind"),
    [("invalid", "invalid_planner_decision"), ("complete_opaque", "invalid_planner_result")],
)
def test_invalid_review_decisions_are_values(
    runtime: PlanningRuntime, owner: Owner, mode: str, kind: str
) -> None:
    result = run(runtime, owner, scripted(review=mode))
    assert result.status == "failed" and error_of(result)["kind"] == kind


@pytest.mark.parametrize(
    "mode",
    ["replan_skip_revision", "replan_other_id", "replan_other_goal", "replan_opaque"],
)
def test_replacement_plan_identity_is_strict(
    runtime: PlanningRuntime, owner: Owner, mode: str
) -> None:
    result = run(runtime, owner, scripted(review=mode, steps=[{"op": "echo"}]))
    assert result.status == "failed"
    assert error_of(result)["kind"] == "invalid_replan"
    assert result.replans == 0


def test_plan_size_budget_rejects_the_initial_plan(runtime: PlanningRuntime, owner: Owner) -> None:
    result = run(runtime, owner, scripted(), options={"max_plan_bytes": 32})
    assert error_of(result)["kind"] == "invalid_initial_plan"
    assert error_of(result)["reason"]["kind"] == "plan_size_limit_exceeded"


def test_memory_exhaustion_is_isolated_and_the_runtime_survives(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    target = scripted(steps=[{"op": "hog"}], review="replan_on_error", recovery=[{"op": "echo"}])
    result = run(runtime, owner, target, options={"max_memory_bytes": 128 * MIB})
    assert obs_errors(result)[0] == {
        "kind": "executor_callback_failed",
        "reason": "callback_memory_exceeded",
    }
    assert result.status == "completed"
    assert run(runtime, owner, scripted()).status == "completed"


def test_a_planner_whose_forked_helpers_exceed_its_cap_fails_and_leaves_none(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    # 4 helpers x 96 MiB under a 256 MiB cap: each fits its own RLIMIT_AS, the tree not.
    # Before they fill their memory the tree (5 x ~35 MiB, shared pages counted per
    # member) is under the cap, so the pids are reported before the watchdog acts.
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    target = scripted(plan="fork_hogs", helpers=4, size=96 * MIB, fifo=fifo)
    ref = runtime.start(
        owner, target, "scripted", {"task": "t"}, None, {"max_memory_bytes": 256 * MIB}
    )
    helpers = read_pids(fifo)
    assert len(helpers) == 4
    result = runtime.await_result(owner, ref, 30)
    assert result.status == "failed", result.status
    assert error_of(result) == {
        "kind": "planner_callback_failed",
        "reason": "callback_memory_exceeded",
    }
    for pid in helpers:
        assert not _alive(pid), f"helper {pid} outlived its run"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# --- cancellation and refs --------------------------------------------------------------


def sleeping_run(rt: PlanningRuntime, owner: Owner, fifo: str) -> str:
    os.mkfifo(fifo)
    return rt.start(owner, scripted(steps=[{"op": "sleep", "fifo": fifo}]), "scripted", 1).ref


def test_cancellation_kills_the_active_worker_and_redacts_the_reason(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    ref = sleeping_run(runtime, owner, str(tmp_path / "fifo"))
    [pid] = read_pids(str(tmp_path / "fifo"))
    assert psutil.pid_exists(pid)
    reason = {"note": "stop api_key=sk-abcdefghijklmnopqrstuvwx", "password": "hunter2"}
    assert runtime.cancel(owner, ref, reason) is True
    assert not psutil.pid_exists(pid)  # gone when the run reports, on both backends
    result = runtime.await_result(owner, ref, 5)
    assert result.status == "cancelled" and result.result is None
    assert error_of(result) == {"kind": "cancelled", "reason": {"note": "stop api_key=[redacted]"}}
    assert decode_result(encode_result(result)) == result


def test_cancel_uses_user_cancelled_by_default(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    ref = sleeping_run(runtime, owner, str(tmp_path / "fifo"))
    read_pids(str(tmp_path / "fifo"))
    runtime.cancel(owner, ref)
    assert error_of(runtime.await_result(owner, ref, 5)) == {
        "kind": "cancelled",
        "reason": "user_cancelled",
    }


def test_a_mismatched_cancel_ref_is_rejected_without_stopping_the_run(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    ref = sleeping_run(runtime, owner, str(tmp_path / "fifo"))
    [pid] = read_pids(str(tmp_path / "fifo"))
    wrong = "plan_" + ("0" if str(ref)[5] != "0" else "1") + str(ref)[6:]
    with pytest.raises(PhloemError) as info:
        runtime.cancel(owner, wrong)
    assert info.value.kind == "not_planning_owner"
    with pytest.raises(PhloemError) as info:
        runtime.cancel(owner, str(ref)[:-1])
    assert info.value.kind == "invalid_planning_ref"
    with pytest.raises(PhloemError) as info:
        runtime.await_result(owner, ref, 0)
    assert info.value.kind == "planning_await_timeout"
    assert psutil.pid_exists(pid)
    runtime.cancel(owner, ref)
    assert runtime.await_result(owner, ref, 5).status == "cancelled"


def test_the_runs_own_cancel_a_failed_stream_or_a_stopping_service_ends_it_cancelled(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    run = runtime.start(owner, scripted(steps=[{"op": "sleep", "fifo": fifo}]), "scripted", 1)
    [pid] = read_pids(fifo)
    run.token.cancel("event stream failed: timeout")  # what a stalled subscriber does
    result = runtime.await_result(owner, run, 10)
    assert result.status == "cancelled" and not psutil.pid_exists(pid)
    assert error_of(result) == {"kind": "cancelled", "reason": "event stream failed: timeout"}


def test_an_unregistered_adapter_name_imports_nothing(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    before = set(sys.modules)
    for planner in (
        "os:system",
        "subprocess",
        {"name": "tests.actors.planning.never_imported:Planner"},
        {"name": "json", "target": {}},
        42,
    ):
        with pytest.raises(PhloemError) as info:
            runtime.start(owner, planner, "scripted", 1)
        assert info.value.kind == "invalid_planning_adapter"
        assert info.value.details is not None and info.value.details["role"] == "planner"
    with pytest.raises(PhloemError) as info:
        runtime.start(owner, "scripted", "os:system", 1)
    assert info.value.details == {"role": "executor", "reason": "unavailable", "name": "os:system"}
    assert set(sys.modules) == before
    assert runtime.refs.count(owner) == 0


def test_configured_adapters_are_checked_at_load() -> None:
    with pytest.raises(PhloemError) as info:
        AdapterRegistry.load({"bad": "tests.actors.planning.adapters:NotAPlanner"})
    assert info.value.details == {"role": "planner", "reason": "missing_callback"}
    with pytest.raises(PhloemError) as info:
        AdapterRegistry.load(executors={"bad": "tests.actors.planning.absent_module:Executor"})
    assert info.value.details == {"role": "executor", "reason": "unavailable"}


def test_invalid_options_and_goals_fail_before_anything_starts(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    active = runtime.active_runs
    with pytest.raises(PhloemError, match="unknown option 'max_heap_words'") as info:
        runtime.start(owner, "scripted", "scripted", 1, None, {"max_heap_words": 1000})
    assert info.value.kind == "invalid_planning_options"
    with pytest.raises(PhloemError) as info:
        runtime.start(owner, "scripted", "scripted", {"f": print})
    assert info.value.kind == "invalid_planning_request"
    assert runtime.active_runs == active and runtime.refs.count(owner) == 0


# --- owners, events, scale ---------------------------------------------------------------


def test_owner_down_kills_the_worker_and_ends_the_run_without_a_result(
    runtime: PlanningRuntime, tmp_path: Path
) -> None:
    owner = Owner.client("leaving")
    ref = sleeping_run(runtime, owner, str(tmp_path / "fifo"))
    [pid] = read_pids(str(tmp_path / "fifo"))
    record = runtime.record(owner, ref)
    handle = record.handle
    assert runtime.owner_down(owner) == 1
    reason = handle.wait(5)
    assert reason is not None and reason.kind == "owner_down"
    assert record.done.is_set() and record.result is None
    assert not psutil.pid_exists(pid)  # gone when the run reports, on both backends
    with pytest.raises(PhloemError) as info:
        runtime.start(owner, "scripted", "scripted", 1)
    assert info.value.kind == "owner_down"


def items_of(receiver: Any, timeout: float = 10.0) -> list[Any]:
    """Every item a run's stream gives `receiver`, decoded, to its end."""
    items = []
    while True:
        try:
            items.append(msgspec.msgpack.decode(receiver.recv(timeout), type=PlanningStreamItem))
        except PhloemError as err:
            assert err.kind == "closed", err
            return items


def test_progress_events_stream_in_order(runtime: PlanningRuntime, owner: Owner) -> None:
    target = scripted(steps=[{"op": "fail"}], review="replan_on_error", recovery=[{"op": "echo"}])
    run = runtime.start(owner, target, "scripted", 1)
    assert runtime.record(owner, run).done.wait(30)
    # subscribed after the run ended: its first subscriber still gets every event
    *events, end = items_of(runtime.subscribe(owner, run))
    result = runtime.await_result(owner, run, 0)
    assert [e.kind for e in events] == [
        "plan_accepted",
        "step_started",
        "observation",
        "replan",
        "step_started",
        "observation",
        "terminal",
    ]
    assert all(isinstance(e, RunEvent) for e in events)
    assert [e.seq for e in events] == list(range(1, 8))
    assert events[-1].data == {"status": "completed", "error": None}
    assert isinstance(end, RunEnd) and end.seq == 8 and end.outcome == "done"
    assert decode_result(end.result) == result and result.status == "completed"


def test_events_beyond_the_credit_window_wait_for_acks(
    runtime: PlanningRuntime, owner: Owner
) -> None:
    run = runtime.start(owner, scripted(), "scripted", 1)
    receiver = runtime.subscribe(owner, run, CreditWindow(2, 1 << 20), auto_ack=False)
    assert runtime.record(owner, run).done.wait(30)
    assert receiver.buffered() == 2  # no acks: nothing beyond the window was delivered
    first = msgspec.msgpack.decode(receiver.recv(1), type=PlanningStreamItem)
    assert first.kind == "plan_accepted"


def test_a_later_subscriber_gets_the_events_from_then_on(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    ref = sleeping_run(runtime, owner, str(tmp_path / "fifo"))
    read_pids(str(tmp_path / "fifo"))
    first = runtime.subscribe(owner, ref)
    second = runtime.subscribe(owner, ref, CreditWindow(1, 1 << 20))
    runtime.cancel(owner, ref, "late")
    early = items_of(first)
    assert [getattr(i, "kind", "end") for i in early] == [
        "plan_accepted",
        "step_started",
        "terminal",
        "end",
    ]
    late = items_of(second)
    assert [getattr(i, "kind", "end") for i in late] == ["terminal", "end"]
    assert late[0].data == {"status": "cancelled", "error": {"kind": "cancelled", "reason": "late"}}
    assert late[1].outcome == "cancelled" and late[1].error.kind == "cancelled"
    with pytest.raises(PhloemError) as info:
        runtime.subscribe(Owner.client("other"), ref)
    assert info.value.kind == "not_planning_owner"


def test_a_callback_that_forks_a_grandchild_and_hangs_leaves_nothing_behind(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    target = scripted(steps=[{"op": "fork_hang", "fifo": fifo}])
    ref = runtime.start(owner, target, "scripted", 1, None, {"callback_timeout_ms": 1500})
    child, grandchild = read_pids(fifo)
    result = runtime.await_result(owner, ref, 10)
    assert obs_errors(result)[0]["reason"] == "callback_timeout"
    for pid in (child, grandchild):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


# --- endings that are not the adapters' doing ----------------------------------------------


def test_stopping_the_runtime_cancels_active_runs_with_reason_shutdown(
    adapters: AdapterRegistry, tmp_path: Path
) -> None:
    rt = PlanningRuntime(adapters, name="planning-shutdown")
    owner = Owner.client("shutdown")
    ref = sleeping_run(rt, owner, str(tmp_path / "fifo"))
    [pid] = read_pids(str(tmp_path / "fifo"))
    rt.stop()
    result = rt.await_result(owner, ref, 5)
    assert result.status == "cancelled"
    assert error_of(result) == {"kind": "cancelled", "reason": "shutdown"}
    assert not psutil.pid_exists(pid)


def test_a_bug_in_the_run_itself_ends_it_as_run_crashed(
    adapters: AdapterRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from phloem.actors.planning.run import PlanningRun

    def broken(self: Any, outcome: Any) -> None:
        raise RuntimeError("bug with api_key=sk-abcdefghijklmnopqrstuvwx")

    monkeypatch.setattr(PlanningRun, "_on_execute", broken)
    rt = PlanningRuntime(adapters, name="planning-crash")
    owner = Owner.client("crash")
    try:
        result = rt.run(owner, "scripted", "scripted", 1)
    finally:
        rt.stop()
    assert result.status == "failed"
    error = error_of(result)
    assert error["kind"] == "run_crashed"
    assert "RuntimeError" in error["reason"] and "sk-" not in error["reason"]
    assert rt.active_runs == 0


def test_losing_the_fork_server_mid_callback_is_an_observation_and_runs_go_on(
    runtime: PlanningRuntime, owner: Owner, tmp_path: Path
) -> None:
    import signal

    from phloem.supervision import forkserver

    if on_ray(runtime):
        pytest.skip("the fork server is the local backend's")

    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    target = scripted(
        steps=[{"op": "sleep", "fifo": fifo}], review="replan_on_error", recovery=[{"op": "echo"}]
    )
    ref = runtime.start(owner, target, "scripted", 1)
    [pid] = read_pids(fifo)
    server = forkserver.server_pid()
    assert server is not None
    os.kill(server, signal.SIGKILL)
    result = runtime.await_result(owner, ref, 30)
    assert obs_errors(result)[0] == {  # typed; not asked again (the step may have acted)
        "kind": "executor_callback_failed",
        "reason": "callback_server_lost",
    }
    assert result.status == "completed" and result.replans == 1
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).wait(10)  # it dies with the server (PR_SET_PDEATHSIG)
    assert not psutil.pid_exists(pid)
