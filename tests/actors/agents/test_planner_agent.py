"""The PlannerAgent loop with the deterministic planners (inline executor)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from phloem.agents import (
    Agent,
    Done,
    DoneWithResult,
    Event,
    EventActions,
    FunctionAgent,
    FunctionResult,
    InvocationContext,
    LoopPlanner,
    NoOp,
    OutcomeStatus,
    ParallelPlanner,
    Planner,
    PlannerAction,
    PlannerAgent,
    PlanningContext,
    RunAgents,
    SequentialPlanner,
    run_agent,
)
from tests.actors.agents.helpers import ScriptAgent, writer

pytestmark = pytest.mark.timeout(45)


def authors(run: Any) -> list[str]:
    return [e.author for e in run.events if e.author != "user"]


def test_sequential_planner_runs_each_agent_once_in_order() -> None:
    pa = PlannerAgent("seq", "", SequentialPlanner, [writer("a", "x"), writer("b", "y")])
    run = run_agent(pa, input="go")
    assert authors(run) == ["a", "b", "seq"]
    assert run.outcome.status == OutcomeStatus.DONE
    assert run.outcome.iterations == 3  # two RunAgents and the Done
    assert [d.action for d in run.outcome.decisions] == ["run_agents", "run_agents", "done"]
    assert run.state["x"] == "a done" and run.state["y"] == "b done"
    assert run.outcome.final_event is not None
    assert run.outcome.final_event.planner_status == "done"
    assert run.events[-1] == run.outcome.final_event


def test_parallel_planner_runs_everything_as_one_group_then_done() -> None:
    pa = PlannerAgent("par", "", ParallelPlanner, [writer("a", "x"), writer("b", "y")])
    run = run_agent(pa)
    assert run.outcome.decisions[0].agents == ("a", "b")
    assert run.outcome.status == "done"
    assert run.outcome.iterations == 2


def test_reaching_max_iterations_is_iteration_limit_not_done() -> None:
    agents = [writer("a", "x"), writer("b", "y"), writer("c", "z")]
    pa = PlannerAgent("seq", "", SequentialPlanner, agents, max_iterations=2)
    run = run_agent(pa)
    assert run.outcome.status == OutcomeStatus.ITERATION_LIMIT
    assert not run.outcome.ok
    assert run.outcome.iterations == 2
    assert "z" not in run.state
    dropped = run.outcome.decisions[-1]
    assert dropped.agents == ("c",) and dropped.executed is False
    assert run.outcome.final_event is not None and run.outcome.final_event.error is not None
    assert run.outcome.final_event.error.kind == "iteration_limit"


def test_a_terminal_action_beyond_the_limit_also_counts_as_the_limit() -> None:
    pa = PlannerAgent("seq", "", SequentialPlanner, [writer("a", "x")], max_iterations=1)
    assert run_agent(pa).outcome.status == "iteration_limit"


def test_max_iterations_is_validated_at_its_edges() -> None:
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_iterations must be between 1 and 100000$"
    ):
        PlannerAgent("p", "", SequentialPlanner, [writer("a", "x")], max_iterations=0)
    PlannerAgent("p", "", SequentialPlanner, [writer("a", "x")], max_iterations=100_000)


def test_no_sub_agents_ends_done_without_calling_the_planner() -> None:
    built: list[Planner] = []

    def factory() -> Planner:
        built.append(SequentialPlanner())
        return built[-1]

    run = run_agent(PlannerAgent("p", "", factory, []))
    assert run.outcome.status == "done" and run.outcome.iterations == 0
    assert built == []


class Scripted(Planner):
    def __init__(self, actions: list[PlannerAction]) -> None:
        self.actions = list(actions)

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        return self.actions.pop(0)

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        return self.actions.pop(0)


def test_noop_counts_as_an_iteration_and_asks_again() -> None:
    pa = PlannerAgent(
        "p", "", lambda: Scripted([NoOp(), NoOp(), RunAgents("a"), Done()]), [writer("a", "x")]
    )
    run = run_agent(pa)
    assert run.outcome.iterations == 4
    assert [d.action for d in run.outcome.decisions] == ["noop", "noop", "run_agents", "done"]


def test_done_with_result_emits_one_text_event_by_the_planner_agent() -> None:
    pa = PlannerAgent("p", "", lambda: Scripted([DoneWithResult("all good")]), [writer("a", "x")])
    run = run_agent(pa)
    assert run.outcome.status == "done_with_result"
    assert run.outcome.result == "all good"
    assert [(e.author, e.text) for e in run.events] == [("p", "all good")]


def test_an_unknown_agent_in_run_agents_is_a_plan_error_naming_the_available_ones() -> None:
    pa = PlannerAgent("p", "", lambda: Scripted([RunAgents("ghost")]), [writer("a", "x")])
    run = run_agent(pa)
    assert run.outcome.status == "plan_error"
    assert "unknown agent 'ghost' (available: a)" in run.outcome.message


def test_a_planner_that_raises_ends_the_run_with_plan_error() -> None:
    class Broken(Planner):
        def first_action(self, ctx: PlanningContext) -> PlannerAction:
            raise RuntimeError("token=abcdef123456 broke")

        def next_action(self, ctx: PlanningContext) -> PlannerAction:
            return Done()

    run = run_agent(PlannerAgent("p", "", Broken, [writer("a", "x")]))
    assert run.outcome.status == "plan_error"
    assert "abcdef123456" not in run.outcome.message
    assert "RuntimeError" in run.outcome.message


def test_a_failing_agent_ends_the_run_with_agent_failed() -> None:
    def boom() -> None:
        raise ValueError("bad input")

    agents = [FunctionAgent("a", "", boom), writer("b", "y")]
    run = run_agent(PlannerAgent("p", "", SequentialPlanner, agents))
    assert run.outcome.status == "agent_failed"
    assert "agent 'a' failed: agent_error" in run.outcome.message
    assert "b" not in authors(run)


def test_on_agent_error_continue_lets_the_planner_go_on() -> None:
    def boom() -> None:
        raise ValueError("bad input")

    agents = [FunctionAgent("a", "", boom), writer("b", "y")]
    run = run_agent(PlannerAgent("p", "", SequentialPlanner, agents, on_agent_error="continue"))
    assert run.outcome.status == "done"
    assert authors(run) == ["a", "b", "p"]
    assert run.events[0].error is not None


def test_a_planner_instance_is_refused_so_no_state_can_leak_between_runs() -> None:
    with pytest.raises(TypeError, match="planner_factory must be a callable"):
        PlannerAgent("p", "", SequentialPlanner(), [writer("a", "x")])  # type: ignore[arg-type]


def test_each_run_builds_a_fresh_planner() -> None:
    built: list[Planner] = []

    def factory() -> Planner:
        built.append(SequentialPlanner())
        return built[-1]

    pa = PlannerAgent("p", "", factory, [writer("a", "x"), writer("b", "y")])
    first, second = run_agent(pa), run_agent(pa)
    assert first.outcome.iterations == second.outcome.iterations == 3
    assert len(built) == 2 and built[0] is not built[1]


class Rendezvous(Agent):
    """Waits until the other run's agent of the same name arrives (proves interleaving)."""

    def __init__(self, name: str, barrier: threading.Barrier) -> None:
        super().__init__(name, "")
        self.barrier = barrier

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        self.barrier.wait(timeout=20)
        count = len([e for e in ctx.events if e.author == self.name])
        yield Event(author=self.name, actions=EventActions(state_delta={self.name: count}))


def test_two_concurrent_runs_of_one_planner_agent_do_not_interfere() -> None:
    barrier = threading.Barrier(2)
    pa = PlannerAgent(
        "p", "", SequentialPlanner, [Rendezvous("a", barrier), Rendezvous("b", barrier)]
    )
    runs: list[Any] = []
    threads = [threading.Thread(target=lambda: runs.append(run_agent(pa))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(runs) == 2
    for run in runs:
        assert authors(run) == ["a", "b", "p"]
        assert run.outcome.status == "done" and run.outcome.iterations == 3
        assert run.state == {"a": 0, "b": 0}


def test_loop_planner_runs_exactly_max_cycles_passes() -> None:
    a, b = ScriptAgent("a", [{}]), ScriptAgent("b", [{}])
    run = run_agent(PlannerAgent("loop", "", lambda: LoopPlanner(3), [a, b]))
    assert authors(run) == ["a", "b"] * 3 + ["loop"]
    assert run.outcome.status == "done"


@pytest.mark.parametrize("cycles", [0, 1])
def test_loop_planner_with_max_cycles_at_most_one_runs_one_pass(cycles: int) -> None:
    a, b = ScriptAgent("a", [{}]), ScriptAgent("b", [{}])
    run = run_agent(PlannerAgent("loop", "", lambda: LoopPlanner(cycles), [a, b]))
    assert authors(run) == ["a", "b", "loop"]


def test_loop_planner_stops_when_the_last_event_escalates() -> None:
    a, b = ScriptAgent("a", [{}]), ScriptAgent("b", [{"escalate": True}])
    run = run_agent(PlannerAgent("loop", "", lambda: LoopPlanner(5), [a, b]))
    assert authors(run) == ["a", "b", "loop"]


def test_loop_planner_honours_an_escalation_followed_by_another_event() -> None:
    # The reference looks only at the very last event and would miss this one.
    a = ScriptAgent("a", [{"escalate": True}, {"delta": {"note": "after"}}])
    b = ScriptAgent("b", [{}])
    run = run_agent(PlannerAgent("loop", "", lambda: LoopPlanner(5), [a, b]))
    assert authors(run) == ["a", "a", "loop"]
    assert run.outcome.status == "done"
    assert "escalation by a" in run.outcome.decisions[-1].notes


def test_agents_of_a_group_see_the_state_as_of_the_group_start() -> None:
    seen: dict[str, Any] = {}

    def first() -> str:
        return "new"

    def second(**kw: Any) -> FunctionResult:
        return FunctionResult(value="b", text="ok")

    class Peek(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            seen.update(ctx.state)
            yield Event(author=self.name, actions=EventActions(state_delta={"y": 1}))

    agents = [FunctionAgent("a", "", first, output_key="x"), Peek("b", "")]
    run = run_agent(PlannerAgent("p", "", ParallelPlanner, agents), state={"x": "old"})
    assert seen["x"] == "old"
    assert run.state["x"] == "new" and run.state["y"] == 1


def test_two_agents_writing_one_key_in_a_group_is_a_plan_error_and_nothing_races() -> None:
    agents = [writer("a", "x", "from a"), writer("b", "x", "from b"), writer("c", "z")]
    run = run_agent(PlannerAgent("p", "", ParallelPlanner, agents), state={"x": "before"})
    assert run.outcome.status == "plan_error"
    assert "agents 'a' and 'b' both wrote 'x'" in run.outcome.message
    assert run.outcome.error is not None and run.outcome.error.details is not None
    assert run.outcome.error.details["conflicts"] == {"x": ["a", "b"]}
    assert run.state["x"] == "before"
    assert run.state["z"] == "c done"


def test_a_conflicting_key_absent_before_the_group_is_removed_again() -> None:
    agents = [writer("a", "x", "from a"), writer("b", "x", "from b")]
    run = run_agent(PlannerAgent("p", "", ParallelPlanner, agents))
    assert run.outcome.status == "plan_error" and "x" not in run.state


def test_cancelling_stops_the_run_with_cancelled() -> None:
    holder: dict[str, Any] = {}

    class Canceller(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            ctx.cancel.cancel("user asked")
            yield Event(author=self.name)

    agents = [Canceller("a", ""), writer("b", "y")]
    run = run_agent(PlannerAgent("p", "", SequentialPlanner, agents))
    holder["run"] = run
    assert run.outcome.status == "cancelled"
    assert "user asked" in run.outcome.message
    assert "y" not in run.state


def test_the_inline_executor_runs_a_group_sequentially_in_the_calling_thread() -> None:
    from phloem.agents import InlineExecutor

    threads: list[str] = []

    class Where(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            threads.append(threading.current_thread().name)
            yield Event(author=self.name)

    pa = PlannerAgent("p", "", ParallelPlanner, [Where("a", ""), Where("b", "")])
    run = run_agent(pa, executor=InlineExecutor())
    assert authors(run) == ["a", "b", "p"]
    assert threads == [threading.current_thread().name] * 2


def test_mutating_a_nested_state_value_in_place_changes_nothing() -> None:
    class Mutator(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            ctx.state["doc"]["title"] = "hijacked"  # no event: must not reach state
            yield Event(author=self.name)

    class Reader(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event(
                author=self.name,
                actions=EventActions(state_delta={"seen": ctx.state["doc"]["title"]}),
            )

    pa = PlannerAgent("p", "", ParallelPlanner, [Mutator("m", ""), Reader("r", "")])
    run = run_agent(pa, state={"doc": {"title": "original"}})
    assert run.state["doc"] == {"title": "original"}
    assert run.state["seen"] == "original"
