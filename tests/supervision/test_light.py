"""The light actor kind (`phloem.supervision.light`): what differs from pykka threads.
The shared semantics run on both kinds in the modules of `conftest.LIGHT_MODULES`."""

from __future__ import annotations

import functools
import threading
import time
import weakref
from typing import Any, ClassVar

import pytest

from phloem.protocols.errors import PhloemError
from phloem.supervision import Actor, ChildSpec, Supervisor, SupervisorSpec, light
from phloem.supervision.actor import ActorHandle
from tests.helpers import wait_collected

pytestmark = pytest.mark.timeout(60)


class Light(Actor):
    light: ClassVar[bool | None] = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []
        self.told_on: str | None = None

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, threading.Event):
            message.wait(30)  # a handler that blocks holds one pool worker
            return "released"
        if isinstance(message, int):
            self.seen.append(message)
            return len(self.seen)
        if message == "told":
            self.told_on = threading.current_thread().name
            return None
        if message == "told on":
            return self.told_on
        return threading.current_thread().name


class Threaded(Light):
    light = False


def _children(sup: Any) -> list[ActorHandle]:
    refs = [i.ref for i in sup.which_children()]
    assert all(isinstance(r, ActorHandle) for r in refs)
    return refs


def test_idle_light_actors_own_no_thread() -> None:
    sup = Supervisor.start(SupervisorSpec(), [])
    before = threading.active_count()
    for i in range(300):
        sup.start_child(ChildSpec(f"l{i}", Light))
    handles = _children(sup)
    assert all(h.ask(1) == 1 for h in handles)
    # the pool's workers at most, never a thread per actor
    assert threading.active_count() - before <= light.pool().workers() <= light.MAX_WORKERS
    assert threading.active_count() - before < 300 / 2
    assert handles[0].stats().thread is None


def test_a_class_chooses_its_kind_whatever_the_default() -> None:
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("l", Light), ChildSpec("t", Threaded)])
    light_one, threaded = _children(sup)
    light_one.tell("told")  # a tell runs on a pool worker
    deadline = time.monotonic() + 30
    while light_one.ask("told on") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert str(light_one.ask("told on")).startswith(light.pool().name)
    assert threaded.ask("where") == threaded.stats().thread


def test_an_ask_to_an_idle_light_actor_is_answered_in_the_asking_thread() -> None:
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("l", Light)])
    [actor] = _children(sup)
    assert actor.ask("where") == threading.current_thread().name
    release = threading.Event()
    actor.tell(release)  # busy: the next ask waits its turn on the pool
    blocked = threading.Thread(target=lambda: actor.ask("where", timeout=30))
    blocked.start()
    with pytest.raises(PhloemError) as info:
        actor.ask("where", timeout=0.2)  # the timeout bounds the wait for a busy actor
    assert info.value.kind == "timeout"
    release.set()
    blocked.join(30)
    assert actor.ask(5) == 1


def test_tell_here_runs_an_idle_light_actor_in_the_telling_thread() -> None:
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("l", Light), ChildSpec("t", Threaded)])
    light_one, threaded = _children(sup)
    light_one.tell_here("told")  # idle: handled before tell_here returns, in this thread
    assert light_one.ask("told on") == threading.current_thread().name
    release = threading.Event()
    light_one.tell(release)  # busy: the next tell_here queues, and the pool handles it
    light_one.tell_here("told")
    release.set()
    deadline = time.monotonic() + 30
    while light_one.ask("told on") == threading.current_thread().name:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert str(light_one.ask("told on")).startswith(light.pool().name)
    threaded.tell_here("told")  # a thread actor's is a plain tell
    assert threaded.ask("told on") == threaded.stats().thread


def test_messages_to_one_light_actor_are_handled_in_order_one_at_a_time() -> None:
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("l", Light)])
    [actor] = _children(sup)

    def send(k: int) -> None:
        for i in range(500):
            actor.tell(k * 1000 + i)

    senders = [threading.Thread(target=send, args=(k,)) for k in range(4)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    assert actor.ask(-1) == 2001  # every message handled, past BATCH at a time
    seen: list[int] = actor.actor.seen  # type: ignore[attr-defined]
    for k in range(4):
        mine = [m for m in seen if m // 1000 == k and m >= 0]
        assert mine == sorted(mine) and len(mine) == 500  # each sender's order kept


def test_blocked_handlers_do_not_starve_other_light_actors() -> None:
    count = light.MIN_WORKERS + 3
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec(f"b{i}", Light) for i in range(count)])
    free = sup.start_child(ChildSpec("free", Light))
    release = threading.Event()
    blocked = _children(sup)[:count]
    for handle in blocked:
        handle.tell(release)  # each holds a worker until released
    deadline = time.monotonic() + 30
    while light.pool().workers() < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(free, ActorHandle) and free.ask(7, timeout=30) == 1
    release.set()
    assert all(h.ask(1, timeout=30) == 1 for h in blocked)


def test_a_killed_light_actor_with_a_stuck_handler_reports_killed_at_once() -> None:
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("l", Light, restart="temporary")])
    [actor] = _children(sup)
    release = threading.Event()
    actor.tell(release)
    actor.kill()
    reason = actor.wait(5)
    assert reason is not None and reason.kind == "killed"
    release.set()


def test_the_default_kind_is_checked() -> None:
    with pytest.raises(ValueError):
        light.set_default_kind("green")
    old = light.set_default_kind("light")
    try:
        assert (
            light.is_light(None) and not light.is_light(False) and light.default_kind() == "light"
        )
    finally:
        light.set_default_kind(old)


def test_the_pool_grows_to_max_workers_exactly_and_queues_past_it() -> None:
    pool = light.Pool("edge")
    gate = threading.Event()
    started = threading.Semaphore(0)
    done: list[int] = []

    def blocked() -> None:
        started.release()
        gate.wait(30)

    for _ in range(light.MAX_WORKERS):
        pool.submit(blocked)
    for _ in range(light.MAX_WORKERS):
        assert started.acquire(timeout=30)
    assert pool.workers() == light.MAX_WORKERS  # exactly at the limit
    pool.submit(lambda: done.append(1))  # one over: queued, no worker more
    assert pool.workers() == light.MAX_WORKERS and done == []
    gate.set()
    deadline = time.monotonic() + 30
    while not done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done == [1]


def test_idle_workers_shrink_back_to_min_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(light, "WORKER_IDLE_S", 0.05)
    pool = light.Pool("shrink")
    gate = threading.Event()

    def hold() -> None:
        gate.wait(30)

    for _ in range(light.MIN_WORKERS + 2):
        pool.submit(hold)
    assert pool.workers() == light.MIN_WORKERS + 2
    gate.set()
    deadline = time.monotonic() + 30
    while pool.workers() > light.MIN_WORKERS and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # several idle periods more: never below the minimum
    assert pool.workers() == light.MIN_WORKERS


def test_an_inbox_makes_its_deque_with_its_first_message_and_loses_none_to_a_race() -> None:
    class Waker:
        def wake(self) -> None:
            pass

    for _ in range(50):
        inbox = light.Inbox(Waker())  # type: ignore[arg-type]
        assert inbox._items is None and inbox.empty() and inbox.qsize() == 0
        with pytest.raises(IndexError):
            inbox.get()
        barrier = threading.Barrier(4)

        def put(k: int, box: light.Inbox = inbox, start: threading.Barrier = barrier) -> None:
            start.wait()  # four first puts at once
            for i in range(100):
                box.put(k * 100 + i)

        threads = [threading.Thread(target=put, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert inbox.qsize() == 400
        assert sorted(inbox.get() for _ in range(400)) == list(range(400))
        assert inbox.empty()


class _Held:
    """Something a task reaches, watched by a weak reference."""


def _touch(held: _Held, done: threading.Event) -> None:
    done.set()


def test_an_idle_pool_worker_keeps_nothing_of_its_last_task_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # idle for longer than the check takes on a loaded machine
    monkeypatch.setattr(light, "WORKER_IDLE_S", 60.0)
    pool = light.Pool("holds-nothing")
    held = _Held()
    alive = weakref.ref(held)
    done = threading.Event()
    pool.submit(functools.partial(_touch, held, done))  # the task itself holds it
    assert done.wait(10)
    del held
    wait_collected(alive, "what the pool's last task reached")
    assert pool.workers() == 1  # the worker is still there, waiting for a task
    monkeypatch.undo()  # a last task, so that the worker waits with the default and ends
    pool.submit(lambda: None)
