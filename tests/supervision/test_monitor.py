"""Monitors and links: Down exactly once, noproc for dead targets, exit propagation."""

from __future__ import annotations

import threading

import pytest

from phloem.protocols.errors import PhloemError
from phloem.supervision import (
    Actor,
    ChildSpec,
    Down,
    Supervisor,
    SupervisorSpec,
    demonitor,
    link,
    monitor,
)
from phloem.supervision.actor import ActorHandle
from tests.supervision.actors import Worker
from tests.supervision.conftest import Recorder

pytestmark = pytest.mark.timeout(30)


def _temp_workers(rec: Recorder, names: str) -> list[ActorHandle]:
    sup = Supervisor.start(
        SupervisorSpec(),
        [ChildSpec(n, (Worker, (n, rec), {}), restart="temporary") for n in names],
    )
    refs = [i.ref for i in sup.which_children()]
    assert all(isinstance(r, ActorHandle) for r in refs)
    return refs  # type: ignore[return-value]


class Inbox(Actor):
    """Collects Down messages sent to it."""

    def __init__(self, got: list[Down], event: threading.Event) -> None:
        super().__init__()
        self.got = got
        self.event = event

    def on_receive(self, message: object) -> None:
        assert isinstance(message, Down)
        self.got.append(message)
        self.event.set()


def test_down_is_delivered_exactly_once_with_the_exit_reason() -> None:
    rec = Recorder()
    (w,) = _temp_workers(rec, "w")
    downs: list[Down] = []
    ref = monitor(w, downs.append)
    w.tell("crash")
    w.wait(10)
    w.stop()
    assert len(downs) == 1
    assert downs[0].ref == ref.id and downs[0].target == w.handle_id
    assert downs[0].reason.kind == "exception"
    assert not demonitor(ref)  # already delivered


def test_monitoring_a_dead_target_delivers_noproc_at_once() -> None:
    rec = Recorder()
    (w,) = _temp_workers(rec, "w")
    w.stop()
    downs: list[Down] = []
    monitor(w, downs.append)
    assert [d.reason.kind for d in downs] == ["noproc"]


def test_an_actor_watcher_receives_down_as_a_message() -> None:
    rec = Recorder()
    got: list[Down] = []
    event = threading.Event()
    sup = Supervisor.start(
        SupervisorSpec(),
        [
            ChildSpec("inbox", (Inbox, (got, event), {})),
            ChildSpec("w", (Worker, ("w", rec), {}), restart="temporary"),
        ],
    )
    inbox, w = (i.ref for i in sup.which_children())
    assert isinstance(inbox, ActorHandle) and isinstance(w, ActorHandle)
    monitor(w, inbox)
    w.stop()
    assert event.wait(10)
    assert [d.reason.kind for d in got] == ["shutdown"]


def test_demonitor_prevents_delivery() -> None:
    rec = Recorder()
    (w,) = _temp_workers(rec, "w")
    downs: list[Down] = []
    ref = monitor(w, downs.append)
    assert demonitor(ref)
    w.stop()
    assert downs == []


def test_each_of_many_monitors_gets_its_own_single_down() -> None:
    rec = Recorder()
    (w,) = _temp_workers(rec, "w")
    downs: list[Down] = []
    refs = {monitor(w, downs.append).id for _ in range(50)}
    w.stop()
    assert sorted(d.ref for d in downs) == sorted(refs)


def test_an_abnormal_exit_terminates_the_linked_child_with_the_same_reason() -> None:
    rec = Recorder()
    a, b = _temp_workers(rec, "ab")
    link(a, b)
    a.tell("crash")
    reason = b.wait(10)
    assert reason is not None and reason.kind == "exception"
    assert reason.error_type == "RuntimeError"


def test_a_normal_exit_does_not_propagate_over_a_link() -> None:
    rec = Recorder()
    a, b = _temp_workers(rec, "ab")
    link(a, b)
    a.stop()
    assert b.is_alive() and b.ask("still") == ("b", "still")


def test_unlink_stops_propagation_and_linking_a_dead_child_is_noproc() -> None:
    rec = Recorder()
    a, b = _temp_workers(rec, "ab")
    link(a, b).unlink()
    a.tell("crash")
    a.wait(10)
    assert b.is_alive()
    with pytest.raises(PhloemError) as info:
        link(a, b)
    assert info.value.kind == "noproc"
