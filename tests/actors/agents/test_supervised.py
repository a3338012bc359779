"""The supervised executor: invocations as actors, concurrent groups, crashes, cancel."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from phloem.agents import (
    Agent,
    CancelToken,
    Event,
    EventActions,
    InvocationContext,
    ParallelPlanner,
    PlannerAgent,
    SequentialPlanner,
    run_agent,
)
from phloem.agents.supervised import SupervisedExecutor
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(45)


class Slow(Agent):
    """Says it started, waits for its partner to start too, then finishes."""

    def __init__(self, name: str, barrier: threading.Barrier, seen: list[Any]) -> None:
        super().__init__(name, "")
        self.barrier, self.seen = barrier, seen

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        self.seen.append(threading.current_thread().name)
        yield Event.from_text(self.name, "started")
        self.barrier.wait(timeout=20)  # both must be running at once to get past this
        yield Event(author=self.name, actions=EventActions(state_delta={self.name: "done"}))


def test_agents_of_one_group_run_concurrently_as_supervised_actors() -> None:
    barrier, seen = threading.Barrier(2), []
    agents = [Slow("a", barrier, seen), Slow("b", barrier, seen)]
    with SupervisedExecutor("concurrency") as executor:
        run = run_agent(PlannerAgent("p", "", ParallelPlanner, agents), executor=executor)
    assert run.outcome.status == "done", run.outcome.message
    texts = [(e.author, e.text or "write") for e in run.events if e.author != "p"]
    assert {texts[0], texts[1]} == {("a", "started"), ("b", "started")}
    assert {texts[2], texts[3]} == {("a", "write"), ("b", "write")}
    assert len(set(seen)) == 2 and threading.current_thread().name not in seen
    assert run.state == {"a": "done", "b": "done"}


def test_each_invocation_is_a_temporary_child_of_the_run_supervisor() -> None:
    children: list[list[str]] = []
    executor = SupervisedExecutor("tree")

    class Look(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            children.append([c.id for c in executor.supervisor.which_children()])
            yield Event(author=self.name)

    run = run_agent(
        PlannerAgent("p", "", SequentialPlanner, [Look("x", ""), Look("y", "")]), executor=executor
    )
    sup = executor.supervisor
    assert run.outcome.status == "done"
    assert children == [["x#1"], ["y#2"]]
    executor.close()
    assert not sup.is_alive()


def test_an_agent_that_raises_completes_the_group_with_agent_failed() -> None:
    class Crash(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event.from_text(self.name, "about to fail")
            raise RuntimeError("secret=abc123def456 exploded")

    class Fine(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event(author=self.name, actions=EventActions(state_delta={"ok": 1}))

    with SupervisedExecutor("crash") as executor:
        run = run_agent(
            PlannerAgent("p", "", ParallelPlanner, [Crash("c", ""), Fine("f", "")]),
            executor=executor,
        )
    assert run.outcome.status == "agent_failed"
    assert "agent 'c' failed: agent_crashed" in run.outcome.message
    assert "abc123def456" not in run.outcome.message
    assert run.state == {"ok": 1}


def test_cancelling_a_running_group_ends_the_run_promptly_with_cancelled() -> None:
    started, release = threading.Event(), threading.Event()

    class Blocker(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event.from_text(self.name, "working")
            started.set()
            ctx.cancel.wait(timeout=30)  # a well-behaved agent watches the token
            release.set()
            yield Event.from_text(self.name, "too late")

    token = CancelToken()
    result: dict[str, Any] = {}
    executor = SupervisedExecutor("cancel")

    def go() -> None:
        agent = PlannerAgent("p", "", ParallelPlanner, [Blocker("b", "")])
        result["run"] = run_agent(agent, executor=executor, cancel=token)

    thread = threading.Thread(target=go)
    thread.start()
    assert started.wait(timeout=20)
    token.cancel("user asked")
    thread.join(timeout=20)
    assert not thread.is_alive()
    run = result["run"]
    assert run.outcome.status == "cancelled"
    assert "user asked" in run.outcome.message
    assert release.wait(timeout=20)
    executor.close()


def test_an_invocation_still_running_after_its_timeout_is_killed_and_reported() -> None:
    release = threading.Event()

    class Stuck(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event.from_text(self.name, "stuck")
            release.wait(timeout=10)  # ignores the cancel token: only a kill ends the group

    try:
        with SupervisedExecutor("timeout", invocation_timeout_s=0.3) as executor:
            run = run_agent(
                PlannerAgent("p", "", ParallelPlanner, [Stuck("s", "")]), executor=executor
            )
        assert run.outcome.status == "agent_failed"
        assert "agent_timeout" in run.outcome.message
    finally:
        release.set()


def test_invocation_timeout_is_validated() -> None:
    with pytest.raises(
        ValueError, match=r"^invalid_argument: invocation_timeout_s must be between 0.01 and 86400$"
    ):
        SupervisedExecutor(invocation_timeout_s=0)


def test_a_nested_planner_agent_runs_its_group_under_the_same_run_supervisor() -> None:
    barrier, seen = threading.Barrier(2), []
    inner = PlannerAgent(
        "inner", "", ParallelPlanner, [Slow("a", barrier, seen), Slow("b", barrier, seen)]
    )
    tail = ScriptTail("tail")
    outer = PlannerAgent("outer", "", SequentialPlanner, [inner, tail])
    with SupervisedExecutor("nested") as executor:
        run = run_agent(outer, executor=executor)
    assert run.outcome.status == "done", run.outcome.message
    assert [e.author for e in run.events][-3:] == ["inner", "tail", "outer"]
    assert run.state == {"a": "done", "b": "done", "tail": 2}


class ScriptTail(Agent):
    """Counts the keys it sees (the nested planner's writes must be visible)."""

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        yield Event(author=self.name, actions=EventActions(state_delta={"tail": len(ctx.state)}))


def test_the_run_supervisor_is_a_light_actor_its_invocations_are_threads() -> None:
    seen: list[Any] = []
    executor = SupervisedExecutor("kinds")
    try:
        barrier = threading.Barrier(1)
        run = run_agent(
            PlannerAgent("p", "", SequentialPlanner, [Slow("a", barrier, seen)]), executor=executor
        )
        assert run.outcome.status == "done", run.outcome.message
        sup = executor.supervisor
        assert sup.stats().thread is None  # no thread of its own (`light`)
        assert sup.actor._is_light
        assert seen and seen[0] != threading.current_thread().name  # the agent's own thread
    finally:
        executor.close()


def test_a_cancel_token_wakes_a_waiter_that_blocked_before_it_was_cancelled() -> None:
    """Its Event is made by the first `wait`: a waiter that came first is woken by the
    cancel, one that comes after returns at once, and a timeout is still False."""
    token = CancelToken()
    assert token.wait(timeout=0.01) is False
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(token.wait(timeout=30)))
    waiter.start()
    wait_until(lambda: token._event is not None, timeout=10)
    token.cancel("stop")
    waiter.join(timeout=30)
    assert woke == [True] and token.cancelled and token.reason == "stop"
    assert token.wait(timeout=0) is True
