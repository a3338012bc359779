"""P2PPlanner: activation on inputs, re-arming on declared output changes, caps."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from phloem.agents import (
    Agent,
    AgentMetadata,
    Event,
    EventActions,
    InvocationContext,
    P2PPlanner,
    PlannerAgent,
    run_agent,
)

pytestmark = pytest.mark.timeout(30)


class Step(Agent):
    """Writes fn(state) to its output key (or nothing when fn returns None)."""

    def __init__(self, name: str, key: str, fn: Callable[[Any], Any]) -> None:
        super().__init__(name, "")
        self.key, self.fn = key, fn

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        value = self.fn(ctx.state)
        delta = {self.key: value} if value is not None else {}
        yield Event(author=self.name, actions=EventActions(state_delta=delta))


META = [
    AgentMetadata("draft", ["topic"], "text"),
    AgentMetadata("critic", ["text"], "critique"),
    AgentMetadata("reviser", ["critique"], "text2"),
]


def waves(run: Any) -> list[tuple[str, ...]]:
    return [d.agents for d in run.outcome.decisions if d.action == "run_agents"]


def test_agents_activate_when_inputs_appear_and_end_when_no_wave_is_ready() -> None:
    agents = [
        Step("draft", "text", lambda s: "v1"),
        Step("critic", "critique", lambda s: f"critique of {s['text']}"),
        Step("reviser", "text2", lambda s: "v2"),
    ]
    pa = PlannerAgent("p2p", "", lambda: P2PPlanner(META, max_invocations=10), agents)
    run = run_agent(pa, state={"topic": "t"})
    assert waves(run) == [("draft",), ("critic",), ("reviser",)]
    assert run.outcome.status == "done"


def test_a_changed_declared_output_re_arms_its_readers() -> None:
    meta = [
        AgentMetadata("writer", ["topic", "feedback"], "text"),
        AgentMetadata("critic", ["text"], "feedback"),
    ]
    counter = {"n": 0}

    def critic(s: Any) -> str:
        counter["n"] += 1
        return "better"  # the same value every time: only the first answer is a change

    agents = [
        Step("writer", "text", lambda s: f"text after {s['feedback']} #{counter['n']}"),
        Step("critic", "feedback", critic),
    ]
    pa = PlannerAgent("p2p", "", lambda: P2PPlanner(meta, max_invocations=20), agents)
    run = run_agent(pa, state={"topic": "t", "feedback": "start"})
    # writer -> critic (feedback changes start->better) -> writer -> critic (unchanged) -> end
    assert waves(run) == [("writer",), ("critic",), ("writer",), ("critic",)]


def test_an_undeclared_key_changing_does_not_re_arm() -> None:
    meta = [AgentMetadata("a", ["topic"], "x"), AgentMetadata("b", ["side"], "y")]

    class Side(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event(author=self.name, actions=EventActions(state_delta={"x": 1, "side": 2}))

    agents = [Side("a", ""), Step("b", "y", lambda s: "y")]
    pa = PlannerAgent("p2p", "", lambda: P2PPlanner(meta, max_invocations=10), agents)
    run = run_agent(pa, state={"topic": "t"})
    # b becomes ready once `side` is present (it was armed from the start), runs once
    assert waves(run) == [("a",), ("b",)]


def test_a_wave_may_overshoot_max_invocations_then_the_run_is_done() -> None:
    meta = [AgentMetadata(n, ["topic"], f"{n}_out") for n in ("a", "b", "c")]
    agents = [Step(n, f"{n}_out", lambda s: 1) for n in ("a", "b", "c")]
    pa = PlannerAgent("p2p", "", lambda: P2PPlanner(meta, max_invocations=2), agents)
    run = run_agent(pa, state={"topic": "t"})
    assert waves(run) == [("a", "b", "c")]
    assert "max_invocations (2) reached" in run.outcome.decisions[-1].notes


def test_the_exit_condition_is_checked_before_each_decision() -> None:
    seen: list[int] = []

    def stop(state: Any, count: int) -> bool:
        seen.append(count)
        return "critique" in state

    agents = [
        Step("draft", "text", lambda s: "v1"),
        Step("critic", "critique", lambda s: "c"),
        Step("reviser", "text2", lambda s: "v2"),
    ]
    pa = PlannerAgent("p2p", "", lambda: P2PPlanner(META, 10, exit_condition=stop), agents)
    run = run_agent(pa, state={"topic": "t"})
    assert waves(run) == [("draft",), ("critic",)]
    assert seen == [1, 2]


def test_max_invocations_is_validated() -> None:
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_invocations must be between 1 and 1000000$"
    ):
        P2PPlanner(META, 0)
