"""OTP supervisor semantics: strategies, restart types, intensity, order, API results."""

from __future__ import annotations

import pytest

from phloem.protocols.errors import PhloemError
from phloem.supervision import (
    ChildSpec,
    ChildStartError,
    Supervisor,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    monitor,
)
from phloem.supervision.actor import ActorHandle
from tests.supervision.actors import FailingStart, Worker
from tests.supervision.conftest import Recorder

pytestmark = pytest.mark.timeout(30)


def _workers(rec: Recorder, names: str, restart: str = "permanent") -> list[ChildSpec]:
    return [ChildSpec(n, (Worker, (n, rec), {}), restart=restart) for n in names]


def _handle(sup: SupervisorRef, child_id: str) -> ActorHandle:
    for info in sup.which_children():
        if info.id == child_id:
            assert isinstance(info.ref, ActorHandle)
            return info.ref
    raise AssertionError(child_id)


def _crash_and_wait(sup: SupervisorRef, child_id: str) -> None:
    before = _handle(sup, child_id)
    before.tell("crash")
    before.wait(10)
    _wait_restarted(sup, child_id, before)


def _wait_restarted(sup: SupervisorRef, child_id: str, before: ActorHandle) -> ActorHandle:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = next(i for i in sup.which_children() if i.id == child_id)
        if info.ref is not None and info.ref is not before and info.state == "running":
            return info.ref
        before.wait(0.01)
    raise AssertionError(f"{child_id} was not restarted")


def test_children_start_in_order_and_stop_in_reverse_order() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(), _workers(rec, "abc"))
    assert rec.events == ["start:a", "start:b", "start:c"]
    assert sup.stop().kind == "shutdown"
    assert rec.events[3:] == ["stop:c", "stop:b", "stop:a"]


def test_one_for_one_restarts_only_the_failed_child() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec("one_for_one"), _workers(rec, "abc"))
    a, c = _handle(sup, "a"), _handle(sup, "c")
    _crash_and_wait(sup, "b")
    assert rec.events == ["start:a", "start:b", "start:c", "start:b"]
    assert _handle(sup, "a") is a and _handle(sup, "c") is c
    assert [i.restarts for i in sup.which_children()] == [0, 1, 0]


def test_one_for_all_stops_others_in_reverse_and_restarts_all_in_order() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec("one_for_all"), _workers(rec, "abcd"))
    _handle(sup, "b").tell("crash")
    events = rec.wait_count("start:d", 2)
    assert events[4:] == ["stop:d", "stop:c", "stop:a", "start:a", "start:b", "start:c", "start:d"]


def test_rest_for_one_restarts_the_failed_child_and_those_started_after_it() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec("rest_for_one"), _workers(rec, "abcd"))
    a = _handle(sup, "a")
    _handle(sup, "b").tell("crash")
    events = rec.wait_count("start:d", 2)
    assert events[4:] == ["stop:d", "stop:c", "start:b", "start:c", "start:d"]
    assert _handle(sup, "a") is a


def test_permanent_child_is_restarted_after_a_normal_exit() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(), _workers(rec, "a"))
    before = _handle(sup, "a")
    before.tell("exit")
    assert before.wait(10) is not None and before.exit_reason.kind == "normal"
    _wait_restarted(sup, "a", before)


def test_transient_child_is_restarted_only_after_an_abnormal_exit() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(), _workers(rec, "ab", restart="transient"))
    _crash_and_wait(sup, "a")
    b = _handle(sup, "b")
    b.tell("exit")
    b.wait(10)
    # A sync call is served after the exit notification: the state is settled.
    infos = {i.id: i for i in sup.which_children()}
    sup.count_children()
    assert infos["b"].state == "undefined" and infos["b"].ref is None
    assert sup.restart_child("b").is_alive()


def test_temporary_child_is_never_restarted_and_its_spec_is_dropped() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(intensity=0), _workers(rec, "ab", restart="temporary"))
    a = _handle(sup, "a")
    a.tell("crash")
    a.wait(10)
    sup.start_child(ChildSpec("sync", (Worker, ("sync", rec), {})))  # serialised after the exit
    assert [i.id for i in sup.which_children()] == ["b", "sync"]
    assert sup.is_alive()  # not counted against intensity 0


def test_crash_loop_escalates_exactly_at_intensity_plus_one() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(intensity=3, period_s=60), _workers(rec, "ab"))
    for _ in range(3):
        _crash_and_wait(sup, "a")
    assert sup.is_alive()
    _handle(sup, "a").tell("crash")
    reason = sup.wait(10)
    assert reason is not None
    assert reason.kind == "shutdown" and reason.detail == "reached_max_restart_intensity"
    assert rec.events.count("start:a") == 4
    assert rec.events[-1] == "stop:b"


def test_intensity_zero_makes_the_first_crash_fatal() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(intensity=0), _workers(rec, "a"))
    _handle(sup, "a").tell("crash")
    reason = sup.wait(10)
    assert reason is not None and reason.kind == "shutdown"


def test_escalation_reaches_the_parent_which_restarts_the_child_supervisor() -> None:
    rec = Recorder()
    inner = SupervisorChild(SupervisorSpec(intensity=0), _workers(rec, "x"))
    top = Supervisor.start(SupervisorSpec(intensity=5), [ChildSpec("inner", inner)])
    inner_ref = top.which_children()[0].ref
    assert isinstance(inner_ref, SupervisorRef)
    _handle(inner_ref, "x").tell("crash")
    assert inner_ref.wait(10) is not None
    new_inner = _wait_restarted(top, "inner", inner_ref)
    assert isinstance(new_inner, SupervisorRef)
    assert rec.events.count("start:x") == 2
    assert top.which_children()[0].restarts == 1


def test_a_child_that_fails_to_start_aborts_the_start_and_stops_earlier_children() -> None:
    rec = Recorder()
    specs = [*_workers(rec, "ab"), ChildSpec("bad", FailingStart), *_workers(rec, "c")]
    with pytest.raises(ChildStartError) as info:
        Supervisor.start(SupervisorSpec(), specs)
    assert info.value.child_id == "bad"
    assert info.value.reason.kind == "exception"
    assert info.value.reason.error_type == "ValueError"
    assert rec.events == ["start:a", "start:b", "stop:b", "stop:a"]


def test_duplicate_child_ids_are_rejected_before_anything_starts() -> None:
    rec = Recorder()
    with pytest.raises(ValueError, match=r"^duplicate child id 'a'$"):
        Supervisor.start(SupervisorSpec(), _workers(rec, "aa"))
    assert rec.events == []


def test_start_child_results_follow_otp() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(), _workers(rec, "a"))
    with pytest.raises(PhloemError) as info:
        sup.start_child(ChildSpec("a", (Worker, ("a", rec), {})))
    assert info.value.kind == "already_started"
    sup.terminate_child("a")
    with pytest.raises(PhloemError) as info:
        sup.start_child(ChildSpec("a", (Worker, ("a", rec), {})))
    assert info.value.kind == "already_present"
    with pytest.raises(PhloemError) as info:
        sup.start_child(ChildSpec("bad", FailingStart))
    assert info.value.kind == "failed_to_start_child"


def test_terminate_keeps_the_spec_and_restart_and_delete_need_a_stopped_child() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(), _workers(rec, "ab"))
    with pytest.raises(PhloemError) as info:
        sup.restart_child("a")
    assert info.value.kind == "running"
    with pytest.raises(PhloemError) as info:
        sup.delete_child("a")
    assert info.value.kind == "running"
    sup.terminate_child("a")
    assert sup.count_children().active == 1 and sup.count_children().specs == 2
    sup.restart_child("a")
    sup.terminate_child("a")
    sup.delete_child("a")
    assert [i.id for i in sup.which_children()] == ["b"]
    with pytest.raises(PhloemError) as info:
        sup.delete_child("nope")
    assert info.value.kind == "not_found"


def test_simple_one_for_one_starts_dynamic_children_from_one_template() -> None:
    rec = Recorder()
    template = ChildSpec("w", Worker, restart="transient")
    sup = Supervisor.start(SupervisorSpec("simple_one_for_one"), [template])
    assert sup.which_children() == []
    h1 = sup.start_child(("one", rec))
    h2 = sup.start_child(("two", rec))
    assert isinstance(h1, ActorHandle) and h1.ask("hi") == ("one", "hi")
    assert sup.count_children().active == 2
    sup.terminate_child(h1)
    assert [i.ref for i in sup.which_children()] == [h2]
    for call in (sup.restart_child, sup.delete_child):
        with pytest.raises(PhloemError) as info:
            call("w-2")
        assert info.value.kind == "simple_one_for_one"
    assert isinstance(h2, ActorHandle)
    h2.tell("crash")
    h2.wait(10)
    restarted = _wait_restarted(sup, "w-2", h2)
    assert restarted.ask("x") == ("two", "x")
    sup.start_child(("three", rec))
    sup.stop()
    # The crashed incarnation of "two" ran on_failure, not on_stop (pykka semantics).
    assert sorted(e for e in rec.events if e.startswith("stop:")) == [
        "stop:one",
        "stop:three",
        "stop:two",
    ]


def test_simple_one_for_one_needs_exactly_one_template() -> None:
    with pytest.raises(ValueError, match="exactly one template"):
        Supervisor.start(SupervisorSpec("simple_one_for_one"), [])


def test_monitoring_a_supervisor_reports_its_escalation() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(intensity=0), _workers(rec, "a"))
    downs: list[object] = []
    monitor(sup, downs.append)
    _handle(sup, "a").tell("crash")
    sup.wait(10)
    assert len(downs) == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"intensity": -1}, "intensity must be at least 0"),
        ({"period_s": 0}, "period_s must be > 0"),
        ({"strategy": "round_robin"}, "'round_robin' is not a valid Strategy"),
    ],
)
def test_supervisor_spec_validation(kwargs: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        SupervisorSpec(**kwargs)  # type: ignore[arg-type]


def test_child_spec_validation() -> None:
    with pytest.raises(ValueError, match="id must be a non-empty string"):
        ChildSpec("", Worker)
    with pytest.raises(ValueError, match="shutdown must be at least 0"):
        ChildSpec("a", Worker, shutdown=-1)
    with pytest.raises(ValueError, match="shutdown must be at least 0"):
        ChildSpec("a", Worker, shutdown=float("nan"))
    with pytest.raises(ValueError, match=r"shutdown must be finite seconds \(or 'infinity'\)"):
        ChildSpec("a", Worker, shutdown=float("inf"))
    with pytest.raises(TypeError, match="start must be"):
        ChildSpec("a", object)
    with pytest.raises(ValueError, match="'forever' is not a valid Restart"):
        ChildSpec("a", Worker, restart="forever")
    assert ChildSpec("s", SupervisorChild(SupervisorSpec())).shutdown == "infinity"
    assert ChildSpec("w", Worker).shutdown == 5.0


class _FlakyStart(Worker):
    """Starts the first time, fails the next `fail_next` starts, then starts again."""

    fail_next = 0

    def on_start(self) -> None:
        if _FlakyStart.fail_next > 0:
            _FlakyStart.fail_next -= 1
            raise OSError("resource busy")
        super().on_start()


def test_a_failed_restart_is_retried_and_every_attempt_counts_against_intensity() -> None:
    rec = Recorder()
    sup = Supervisor.start(
        SupervisorSpec(intensity=10, period_s=60), [ChildSpec("f", (_FlakyStart, ("f", rec), {}))]
    )
    _FlakyStart.fail_next = 2
    before = _handle(sup, "f")
    before.tell("crash")
    _wait_restarted(sup, "f", before)
    assert _FlakyStart.fail_next == 0
    assert len(sup._sup._restart_times) == 3  # the crash and two failed attempts


def test_failed_restarts_that_keep_failing_escalate() -> None:
    rec = Recorder()
    sup = Supervisor.start(
        SupervisorSpec(intensity=2, period_s=60), [ChildSpec("f", (_FlakyStart, ("f", rec), {}))]
    )
    _FlakyStart.fail_next = 1_000
    _handle(sup, "f").tell("crash")
    reason = sup.wait(10)
    _FlakyStart.fail_next = 0
    assert reason is not None and reason.detail == "reached_max_restart_intensity"


def test_after_waiting_for_a_crash_which_children_already_shows_the_restart() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(intensity=100, period_s=60), _workers(rec, "a"))
    for n in range(1, 31):
        child = _handle(sup, "a")
        child.tell("crash")
        child.wait(10)
        (info,) = sup.which_children()
        assert info.restarts == n and info.ref is not child and info.state == "running"


def test_a_supervisor_refuses_children_past_max_children(monkeypatch: pytest.MonkeyPatch) -> None:
    from phloem.supervision import supervisor as supervisor_module

    monkeypatch.setattr(supervisor_module, "MAX_CHILDREN", 2)
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(), _workers(rec, "ab"))
    with pytest.raises(PhloemError) as info:
        sup.start_child(ChildSpec("c", (Worker, ("c", rec), {})))
    assert info.value.kind == "too_many_children"
    assert "start:c" not in rec.events


def test_dynamic_children_are_found_by_handle_and_handle_id_and_a_stale_handle_is_not() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec("simple_one_for_one"), [ChildSpec("w", Worker)])
    try:
        handles = [sup.start_child((f"n{i}", rec)) for i in range(5)]
        first = handles[0]
        assert isinstance(first, ActorHandle)
        first.tell("crash")
        first.wait(10)
        restarted = _wait_restarted(sup, "w-1", first)
        for stale in (first, first.handle_id):  # the crashed incarnation is gone
            with pytest.raises(PhloemError) as info:
                sup.terminate_child(stale)
            assert info.value.kind == "not_found"
        sup.terminate_child(restarted.handle_id)
        sup.terminate_child(handles[2])
        assert [i.id for i in sup.which_children()] == ["w-2", "w-4", "w-5"]  # start order
        assert sup.count_children().active == 3
    finally:
        sup.stop()


def test_a_static_child_deleted_and_started_again_goes_last_in_start_order() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec("rest_for_one"), _workers(rec, "abc"))
    try:
        sup.terminate_child("a")
        sup.delete_child("a")
        sup.start_child(ChildSpec("a", (Worker, ("a", rec), {})))
        assert [i.id for i in sup.which_children()] == ["b", "c", "a"]
        rec.events.clear()
        _crash_and_wait(sup, "c")  # rest_for_one: c and the later a restart, b does not
        assert "start:b" not in rec.events and "start:a" in rec.events
    finally:
        sup.stop()
