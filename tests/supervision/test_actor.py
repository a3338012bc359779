"""Actor handles: exit reasons, shutdown deadlines, bounded inboxes, decode errors."""

from __future__ import annotations

import threading

import msgspec
import pykka
import pytest

from phloem.protocols.errors import PhloemError
from phloem.supervision import ChildSpec, Supervisor, SupervisorSpec
from phloem.supervision.actor import ActorHandle, tell_if_alive
from tests.supervision.actors import Blocker, Put, Store, Tiny, Worker
from tests.supervision.conftest import Recorder

pytestmark = pytest.mark.timeout(30)


def _only_child(specs: list[ChildSpec]) -> ActorHandle:
    sup = Supervisor.start(SupervisorSpec(), specs)
    ref = sup.which_children()[0].ref
    assert isinstance(ref, ActorHandle)
    return ref


def test_an_exception_in_ask_goes_back_to_the_caller_and_the_actor_lives_on() -> None:
    store = _only_child([ChildSpec("store", Store)])
    with pytest.raises(TypeError, match="unexpected"):
        store.ask("not a store message")
    assert store.is_alive()
    assert store.ask(Put("k", 1)) == "ok"


def test_exception_reason_carries_the_type_and_a_redacted_message() -> None:
    rec = Recorder()
    worker = _only_child([ChildSpec("w", (Worker, ("w", rec), {}), restart="temporary")])
    worker.tell("crash")
    reason = worker.wait(10)
    assert reason is not None and reason.kind == "exception"
    assert reason.error_type == "RuntimeError"
    assert reason.message == "w crashed api_key=[redacted]"


def test_a_message_that_fails_to_decode_is_an_error_to_the_sender_only() -> None:
    store = _only_child([ChildSpec("store", Store)])
    with pytest.raises(PhloemError) as info:
        store.ask_raw({"type": "put", "key": "k", "value": "not-an-int"})
    assert info.value.kind == "bad_message"
    assert "Expected `int`, got `str` - at `$.value`" in info.value.message
    with pytest.raises(PhloemError) as info:
        store.ask_raw(b"\xc1garbage")
    assert info.value.kind == "bad_message"
    assert store.is_alive()
    raw = msgspec.msgpack.encode({"type": "put", "key": "k", "value": 7})
    assert store.ask_raw(raw) == "ok"
    assert store.ask_raw({"type": "get", "key": "k"}) == 7


def test_a_full_inbox_answers_backpressure_instead_of_queueing() -> None:
    gate = threading.Event()
    tiny = _only_child([ChildSpec("tiny", (Tiny, (gate,), {}), shutdown="brutal_kill")])
    tiny.tell("busy")  # taken by the actor, which now blocks on the gate
    import time

    deadline = time.monotonic() + 10
    while tiny.mailbox_depth() != 0 and time.monotonic() < deadline:
        gate.wait(0.005)
    tiny.tell(1)
    tiny.tell(2)
    assert tiny.mailbox_depth() == 2
    with pytest.raises(PhloemError) as info:
        tiny.tell(3)
    assert info.value.kind == "backpressure"
    gate.set()


def test_stop_waits_the_shutdown_time_then_kills_a_stuck_actor() -> None:
    release, entered = threading.Event(), threading.Event()
    blocker = _only_child([ChildSpec("b", (Blocker, (release, entered), {}))])
    blocker.tell("block")
    assert entered.wait(10)
    reason = blocker.stop(timeout=0.1)
    assert reason.kind == "killed"
    release.set()


def test_brutal_kill_does_not_wait() -> None:
    release, entered = threading.Event(), threading.Event()
    sup = Supervisor.start(
        SupervisorSpec(),
        [ChildSpec("b", (Blocker, (release, entered), {}), shutdown="brutal_kill")],
    )
    blocker = sup.which_children()[0].ref
    assert isinstance(blocker, ActorHandle)
    blocker.tell("block")
    assert entered.wait(10)
    sup.terminate_child("b")
    assert blocker.exit_reason is not None and blocker.exit_reason.kind == "killed"
    release.set()


def test_a_graceful_stop_ends_with_shutdown_and_a_self_stop_with_normal() -> None:
    rec = Recorder()
    sup = Supervisor.start(
        SupervisorSpec(),
        [
            ChildSpec("a", (Worker, ("a", rec), {}), restart="temporary"),
            ChildSpec("b", (Worker, ("b", rec), {}), restart="temporary"),
        ],
    )
    a, b = (i.ref for i in sup.which_children())
    assert isinstance(a, ActorHandle) and isinstance(b, ActorHandle)
    assert a.stop().kind == "shutdown"
    b.tell("exit")
    reason = b.wait(10)
    assert reason is not None and reason.kind == "normal"


def test_asking_a_stopped_actor_is_noproc() -> None:
    rec = Recorder()
    worker = _only_child([ChildSpec("w", (Worker, ("w", rec), {}), restart="temporary")])
    worker.stop()
    with pytest.raises(PhloemError) as info:
        worker.ask("hi")
    assert info.value.kind == "noproc"


def test_tell_if_alive_delivers_to_a_live_actor_and_ignores_a_gone_one() -> None:
    rec = Recorder()
    worker = _only_child([ChildSpec("w", (Worker, ("w", rec), {}), restart="temporary")])
    ref = worker.actor_ref
    tell_if_alive(ref, "exit")  # delivered: the worker stops itself
    assert worker.wait(10) is not None
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("late")  # what exit callbacks used to raise (and log a traceback for)
    tell_if_alive(ref, "late")  # nothing to tell, nothing raised


class _StopsAtOnce(Worker):
    def on_start(self) -> None:
        super().on_start()
        self.stop()


def test_an_actor_that_stops_right_after_a_successful_start_is_not_a_failed_start() -> None:
    rec = Recorder()
    for _ in range(50):
        handle = ActorHandle.start(_StopsAtOnce, ("s", rec))
        reason = handle.wait(10)
        assert reason is not None and reason.kind == "normal"


def test_children_know_the_supervisor_that_started_them() -> None:
    rec = Recorder()
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("w", (Worker, ("w", rec), {}))])
    child = sup.which_children()[0].ref
    assert isinstance(child, ActorHandle)
    assert child._parent is sup
    assert sup.parent is None


def test_an_actor_runs_on_the_kind_asked_for(actor_kind: str) -> None:
    store = _only_child([ChildSpec("store", Store)])
    assert store.ask(Put("k", 1)) == "ok"
    on_its_own_thread = store.stats().thread is not None
    assert on_its_own_thread == (actor_kind == "thread")
