"""The `agents` service through an embedded Tree and its clients."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from phloem import PhloemError, Tree
from phloem.agents import (
    Agent,
    Event,
    EventActions,
    InvocationContext,
    PlannerAgent,
    SequentialPlanner,
)
from phloem.config import Config

pytestmark = pytest.mark.timeout(30)

EXAMPLE = "phloem.examples.supplier_risk"
FUNCTIONS = {
    "fetchFilings": ("fetch_filings", ["company"], "filings"),
    "fetchNews": ("fetch_news", ["company"], "news"),
    "analyzeFinancials": ("analyze_financials", ["filings"], "financials"),
    "assessRisk": ("assess_risk", ["financials", "news"], "risk"),
    "writeBrief": ("write_brief", ["company", "risk"], "brief"),
}


def config(**agents: Any) -> Config:
    data = {
        "services": {"disabled": ["echo"]},
        "agents": {
            "functions": {
                name: {"fn": f"{EXAMPLE}:{fn}", "input_keys": keys, "output_key": out}
                for name, (fn, keys, out) in FUNCTIONS.items()
            },
            "planners": {
                "supplierBrief": {
                    "planner": "goal_oriented",
                    "description": "Builds a supplier risk brief",
                    "sub_agents": list(FUNCTIONS),
                    "goal": "brief",
                    "replan": "replan",
                    "max_replans": 2,
                    "max_iterations": 12,
                },
                "chain": {"planner": "sequential", "sub_agents": ["fetchNews", "fetchFilings"]},
            },
            **agents,
        },
    }
    return msgspec.convert(data, Config)


@pytest.fixture
def tree() -> Iterator[Tree]:
    t = Tree.start(config(), name="agents-test")
    try:
        yield t
    finally:
        t.stop()


def test_the_supplier_brief_runs_through_the_tree(tree: Tree) -> None:
    seen: list[Event] = []
    run = tree.run_agent(
        "supplierBrief", state={"company": "ACME Components"}, on_event=seen.append
    )
    assert run.outcome.status == "done", run.outcome.message
    assert "Risk level: HIGH" in run.state["brief"]
    assert [e.id for e in seen] == [e.id for e in run.events]
    groups = [list(d.agents) for d in run.outcome.decisions if d.action == "run_agents"]
    assert groups == [
        ["fetchFilings", "fetchNews"],
        ["analyzeFinancials"],
        ["assessRisk"],
        ["writeBrief"],
    ]


def test_list_and_plan_through_a_client(tree: Tree) -> None:
    with tree.client() as client:
        names = {a.name: a for a in client.list_agents()}
        assert names["supplierBrief"].kind == "planner"
        assert names["supplierBrief"].max_iterations == 12
        assert client.plan_agent("supplierBrief", {"company": "x"}) == [
            ["fetchFilings", "fetchNews"],
            ["analyzeFinancials"],
            ["assessRisk"],
            ["writeBrief"],
        ]
        assert client.plan_agent("chain") == [["fetchNews"], ["fetchFilings"]]
        with pytest.raises(PhloemError) as info:
            client.plan_agent("supplierBrief", {})
        assert info.value.kind == "plan_error"
        with pytest.raises(PhloemError) as unknown:
            client.run_agent("nobody")
        assert unknown.value.kind == "unknown_agent"


def test_an_unknown_company_ends_with_agent_failed(tree: Tree) -> None:
    run = tree.run_agent("supplierBrief", state={"company": "Nobody Inc"})
    assert run.outcome.status == "agent_failed"
    assert "no filings for 'Nobody Inc'" in run.outcome.message


class Waiter(Agent):
    def __init__(self, name: str, started: threading.Event) -> None:
        super().__init__(name, "waits until cancelled")
        self.started = started
        self.stopped = threading.Event()
        self.reason: str | None = None

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        yield Event.from_text(self.name, "waiting")
        self.started.set()
        ctx.cancel.wait(timeout=20)
        self.reason = ctx.cancel.reason
        self.stopped.set()
        yield Event.from_text(self.name, "stopped waiting")


def test_a_running_planner_agent_is_cancelled_by_its_owner_ref_only(tree: Tree) -> None:
    started = threading.Event()
    tree.register_agent(PlannerAgent("waiting", "", SequentialPlanner, [Waiter("w", started)]))
    owner, other = tree.client("owner"), tree.client("other")
    try:
        run = owner.start_agent_run("waiting")
        stream = owner.subscribe(run.stream)
        assert started.wait(timeout=20)
        with pytest.raises(PhloemError) as info:
            other.cancel_agent_run(run.ref)
        assert info.value.kind == "not_owner"
        with pytest.raises(PhloemError) as bad:
            owner.cancel_agent_run("agentrun_nothex")
        assert bad.value.kind == "invalid_ref"
        owner.cancel_agent_run(run.ref)
        items = list(stream)
        end = msgspec.convert(items[-1], dict)
        assert end["type"] == "end" and end["outcome"] == "cancelled"
        assert end["result"]["outcome"]["status"] == "cancelled"
    finally:
        owner.close()
        other.close()


def test_closing_the_owner_cancels_its_runs(tree: Tree) -> None:
    started = threading.Event()
    waiter = Waiter("w2", started)
    tree.register_agent(PlannerAgent("orphan", "", SequentialPlanner, [waiter]))
    client = tree.client("leaving")
    started_run = client.start_agent_run("orphan")
    client.subscribe(started_run.stream)
    assert started.wait(timeout=20)
    client.close()
    assert waiter.stopped.wait(timeout=20)
    assert waiter.reason is not None and "owner_down" in waiter.reason


def test_registering_an_agent_object_and_running_it(tree: Tree) -> None:
    class Hello(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event.from_text(
                self.name, f"hello {ctx.user_content.text if ctx.user_content else ''}"
            )

    run = tree.run_agent(Hello("hello", "greets"), input="world")
    assert run.outcome.status == "done"
    assert run.events[-1].text == "hello world"


class Echo(Agent):
    """Writes state["x"] to "echo"; waits at `barrier` (if any) so runs overlap."""

    def __init__(self, name: str, barrier: threading.Barrier | None = None) -> None:
        super().__init__(name, "echoes x")
        self.barrier = barrier

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            actions=EventActions(state_delta={"echo": ctx.state["x"]}),
        )


def test_a_freshly_built_agent_object_runs_again_and_again(tree: Tree) -> None:
    for x in ("first", "second", "third"):
        run = tree.run_agent(Echo("fresh"), state={"x": x})  # a new object per invocation
        assert run.outcome.status == "done", run.outcome.message
        assert run.state == {"x": x, "echo": x}


def test_an_agent_object_runs_itself_not_what_is_registered_under_its_name(tree: Tree) -> None:
    tree.register_agent(Echo("named"))

    class Other(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            yield Event.from_text(self.name, "the object itself")

    run = tree.run_agent(Other("named", ""))
    assert run.events[-1].text == "the object itself"
    assert tree.run_agent("named", state={"x": 1}).state["echo"] == 1  # the named API stays
    with tree.client() as client:
        assert [a.name for a in client.list_agents()].count("named") == 1  # nothing added


def test_concurrent_runs_of_one_agent_object_stay_isolated(tree: Tree) -> None:
    agent = Echo("shared", threading.Barrier(2))
    runs: dict[int, Any] = {}

    def go(i: int) -> None:
        runs[i] = tree.run_agent(agent, state={"x": i})

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert sorted(runs) == [0, 1]
    for i, run in runs.items():
        assert run.outcome.status == "done", run.outcome.message
        assert run.state == {"x": i, "echo": i}
    assert runs[0].session_id != runs[1].session_id


def test_credential_shaped_state_never_leaves_the_service(tree: Tree) -> None:
    class Leaky(Agent):
        def run(self, ctx: InvocationContext) -> Iterator[Event]:
            delta = {"api_key": "sk-live-secret", "result": {"password": "x", "total_tokens": 7}}
            yield Event(author=self.name, actions=EventActions(state_delta=delta))

    seen: list[Event] = []
    run = tree.run_agent(Leaky("leaky", ""), on_event=seen.append)
    assert run.state == {"result": {"total_tokens": 7}}
    assert "sk-live-secret" not in repr(run) and "sk-live-secret" not in repr(seen)


def test_a_run_streams_under_a_one_message_credit_window(tree: Tree) -> None:
    from phloem.protocols.credit import CreditWindow

    with tree.client("slow reader") as client:
        seen: list[Event] = []
        run = client.run_agent(
            "supplierBrief",
            state={"company": "Borealis Metals"},
            on_event=seen.append,
            window=CreditWindow(1, 1024 * 1024),
        )
    assert run.outcome.status == "done"
    assert [e.id for e in seen] == [e.id for e in run.events]
    assert "Risk level: LOW" in run.state["brief"]


def test_the_make_run_step_returns_the_brief(tree: Tree) -> None:
    from phloem.examples.supplier_risk import run_example

    with tree.client("make run") as client:
        brief = run_example(client)
        assert brief.startswith("Supplier risk brief: ACME Components")
        with pytest.raises(PhloemError) as info:
            run_example(client, company="Nobody")
        assert info.value.kind == "agent_failed"


def test_a_live_run_shows_in_the_tree_with_its_driver_and_invocations(tree: Tree) -> None:
    started = threading.Event()
    tree.register_agent(PlannerAgent("visible", "", SequentialPlanner, [Waiter("w3", started)]))
    with tree.client("viewer") as client:
        run = client.start_agent_run("visible")
        stream = client.subscribe(run.stream)
        assert started.wait(timeout=20)
        snap = client.tree()
        agents = next(n for n in snap.roots[0].children if n.id == "agents")
        assert [c.id for c in agents.children] == ["runs", "service"]
        runs = agents.children[0]
        [one] = runs.children
        assert one.id.startswith("agent-run:visible-") and one.type == "supervisor"
        assert sorted(c.id for c in one.children) == ["driver", "w3#1"]  # driver, then w3
        client.cancel_agent_run(run.ref)
        list(stream)


def test_make_run_lists_the_supplier_brief_after_the_planning_example(tree: Tree) -> None:
    from phloem.examples import run_all, supplier_risk

    modules = run_all.EXAMPLE_MODULES
    assert modules.index("phloem.examples.supplier_risk") > modules.index(
        "phloem.examples.planning_report"
    )
    plan, brief = supplier_risk.steps()
    with tree.client("make run") as client:
        assert plan.run(client).splitlines()[0] == "1. fetchFilings, fetchNews"
        assert brief.run(client).startswith("Supplier risk brief: ACME Components")
