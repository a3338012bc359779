"""Named limits of the agents layer, each at its edge."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import msgspec
import pytest

from phloem import PhloemError, Tree
from phloem.actors.agents.service import MAX_AGENT_INPUT_CHARS
from phloem.agents import (
    Agent,
    Event,
    FunctionAgent,
    InvocationContext,
    ParallelPlanner,
    PlannerAgent,
    SequentialPlanner,
    run_agent,
)
from phloem.agents.agent import MAX_DESCRIPTION_CHARS
from phloem.agents.planner_agent import MAX_SUB_AGENTS
from phloem.agents.supervised import GROUP_QUEUE_LIMIT
from phloem.config import Config
from tests.actors.agents.helpers import writer

pytestmark = pytest.mark.timeout(30)


class Chatty(Agent):
    def __init__(self, name: str, count: int) -> None:
        super().__init__(name, "")
        self.count = count

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        for i in range(self.count):
            yield Event.from_text(self.name, str(i))


def test_a_group_producing_more_events_than_the_queue_holds_still_completes() -> None:
    n = GROUP_QUEUE_LIMIT + 10
    pa = PlannerAgent("p", "", ParallelPlanner, [Chatty("a", n), Chatty("b", n)])
    run = run_agent(pa)
    assert run.outcome.status == "done"
    texts = [e.text for e in run.events if e.author == "a"]
    assert texts == [str(i) for i in range(n)]


def test_sub_agents_are_capped() -> None:
    agents = [writer(f"a{i}", f"k{i}") for i in range(MAX_SUB_AGENTS)]
    PlannerAgent("p", "", SequentialPlanner, agents)
    with pytest.raises(
        ValueError, match=rf"^sub_agents must have at most {MAX_SUB_AGENTS} agents$"
    ):
        PlannerAgent("p", "", SequentialPlanner, [*agents, writer("one_more", "x")])


def test_descriptions_are_capped() -> None:
    FunctionAgent("ok", "d" * MAX_DESCRIPTION_CHARS, lambda: 1)
    with pytest.raises(ValueError, match=rf"^description must be at most {MAX_DESCRIPTION_CHARS}"):
        FunctionAgent("no", "d" * (MAX_DESCRIPTION_CHARS + 1), lambda: 1)


class Hold(Agent):
    def __init__(self, name: str, started: threading.Event) -> None:
        super().__init__(name, "")
        self.started = started

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        self.started.set()
        ctx.cancel.wait(timeout=20)
        yield Event(author=self.name)


def test_max_concurrent_runs_refuses_one_more_with_backpressure() -> None:
    cfg = msgspec.convert(
        {"services": {"disabled": ["echo"]}, "agents": {"max_concurrent_runs": 1}}, Config
    )
    started = threading.Event()
    with Tree.start(cfg, name="limits") as tree, tree.client() as client:
        tree.register_agent(PlannerAgent("hold", "", SequentialPlanner, [Hold("h", started)]))
        first = client.start_agent_run("hold")
        client.subscribe(first.stream)
        assert started.wait(timeout=20)
        with pytest.raises(PhloemError) as info:
            client.start_agent_run("hold")
        assert info.value.kind == "backpressure"
        client.cancel_agent_run(first.ref)


def test_input_longer_than_the_cap_is_refused() -> None:
    cfg = msgspec.convert({"services": {"disabled": ["echo"]}}, Config)
    with Tree.start(cfg, name="limits2") as tree, tree.client() as client:
        tree.register_agent(writer("w", "x"))
        run = client.run_agent("w", input="x" * MAX_AGENT_INPUT_CHARS)
        assert run.outcome.status == "done"
        with pytest.raises(PhloemError) as info:
            client.start_agent_run("w", input="x" * (MAX_AGENT_INPUT_CHARS + 1))
        assert info.value.kind == "bad_message"
