"""Children started, stopped and restarted by tree path (`phloem.supervision.control`):
a permanent child stopped by hand stays down through its group's restarts, no control is
charged to intensity, dynamic children are stopped by path and go, and `stopped_paths`
lists at most its limit."""

from __future__ import annotations

import pytest

from phloem.supervision.control import control_child, split_path, stopped_paths
from phloem.supervision.spec import ChildSpec, SupervisorChild, SupervisorSpec
from phloem.supervision.supervisor import Supervisor, SupervisorRef
from tests.helpers import raises_kind, wait_until
from tests.supervision.actors import Worker
from tests.supervision.conftest import Recorder

pytestmark = pytest.mark.timeout(60)
T = 30.0


def workers(rec: Recorder, names: str) -> list[ChildSpec]:
    return [ChildSpec(n, (Worker, (n, rec), {})) for n in names]


def handle_of(sup: SupervisorRef, child_id: str) -> object:
    return next(i.ref for i in sup.which_children() if i.id == child_id)


def test_a_child_stopped_by_hand_stays_down_through_its_group_restart() -> None:
    rec = Recorder()
    sup = Supervisor.start(
        SupervisorSpec("rest_for_one", intensity=1, period_s=600), workers(rec, "abc")
    )
    try:
        assert control_child(sup, "stop", "c", T).state == "stopped"
        for _ in range(5):  # far more than intensity 1, had they counted
            assert control_child(sup, "restart", "b", T).state == "running"
        a = handle_of(sup, "a")
        a.tell("crash")  # type: ignore[attr-defined]
        wait_until(lambda: handle_of(sup, "a") not in (None, a), T, "a restarted")
        rows = {i.id: i for i in sup.which_children()}
        assert sup.is_alive() and rows["c"].state == "stopped" and rows["c"].ref is None
        assert rows["b"].state == "running" and rows["a"].restarts == 1
        assert stopped_paths(sup, 10) == ["c"]
        started = control_child(sup, "start", "c", T)
        assert started.state == "running" and started.previous is None and started.handle
        assert stopped_paths(sup, 10) == []
    finally:
        sup.stop()


def test_restart_reports_the_incarnations_before_and_after() -> None:
    sup = Supervisor.start(SupervisorSpec(), workers(Recorder(), "a"), name="root")
    try:
        before = handle_of(sup, "a")
        done = control_child(sup, "restart", "root/a", T)
        assert done.path == "a" and done.previous == before.handle_id  # type: ignore[attr-defined]
        assert done.handle == handle_of(sup, "a").handle_id != done.previous  # type: ignore[attr-defined]
        assert raises_kind(control_child, sup, "start", "a", T) == "already_started"
        control_child(sup, "stop", "a", T)
        assert raises_kind(control_child, sup, "stop", "a", T) == "not_running"
        assert control_child(sup, "restart", "a", T).state == "running"  # a stopped one too
    finally:
        sup.stop()


def test_dynamic_children_are_stopped_by_path_and_go() -> None:
    rec = Recorder()
    template = ChildSpec("w", (Worker, ("w", rec), {}), restart="temporary")
    dynamic = SupervisorChild(SupervisorSpec("simple_one_for_one"), [template])
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("pool", dynamic)])
    try:
        pool = handle_of(sup, "pool")
        assert isinstance(pool, SupervisorRef)
        pool.start_child(())
        [row] = pool.which_children()
        assert (
            raises_kind(control_child, sup, "restart", f"pool/{row.id}", T) == "simple_one_for_one"
        )
        assert raises_kind(control_child, sup, "start", f"pool/{row.id}", T) == "simple_one_for_one"
        done = control_child(sup, "stop", f"pool/{row.id}", T)
        assert done.state == "removed" and pool.which_children() == []
        assert raises_kind(control_child, sup, "stop", f"pool/{row.id}", T) == "unknown_child"
    finally:
        sup.stop()


def test_paths_that_name_no_child_the_root_and_bad_actions() -> None:
    sup = Supervisor.start(SupervisorSpec(), workers(Recorder(), "a"), name="root")
    try:
        for path in ("b", "a/deeper", "root/b", "x" * 513):
            assert raises_kind(control_child, sup, "stop", path, T) == "unknown_child", path
        for path in ("", "/", "root", "/root/"):
            assert raises_kind(control_child, sup, "stop", path, T) == "not_controllable", path
        assert raises_kind(control_child, sup, "pause", "a", T) == "invalid_argument"
        assert split_path(sup, "/root//a/") == ["a"]
    finally:
        sup.stop()


def test_stopped_paths_lists_at_most_its_limit() -> None:
    names = "abcde"
    inner = SupervisorChild(SupervisorSpec(), workers(Recorder(), names))
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("g", inner)])
    try:
        for n in names:
            control_child(sup, "stop", f"g/{n}", T)
        assert stopped_paths(sup, len(names)) == [f"g/{n}" for n in names]  # at the limit
        assert stopped_paths(sup, len(names) - 1) == [f"g/{n}" for n in names[:-1]]  # one under
    finally:
        sup.stop()
