"""Agent benchmarks: one supervised sub-agent invocation vs a raw pykka actor's lifetime,
the supplier risk brief (4 groups, 5 agents) end to end in process, and one delegated
agent call (an agent tool: a run of its own through the tree's `agents` service) vs the
same agent run directly through the tree."""

from __future__ import annotations

from typing import Any

import pykka

from phloem.agents import FunctionAgent, PlannerAgent, SequentialPlanner, run_agent
from phloem.agents.supervised import SupervisedExecutor
from tests.actors.agents.helpers import SUPPLIER, supplier_agents
from tests.perf.common import median_seconds, row


class _Raw(pykka.ThreadingActor):
    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        return message


def _raw_actor_lifetime() -> None:
    ref = _Raw.start()
    ref.ask("x")
    ref.stop()


def _delegation() -> tuple[float, float]:
    """Median seconds of a function agent run through an embedded tree, and of the same
    agent called as a delegation tool (its own run in the one run lifecycle)."""
    import msgspec

    from phloem import Tree
    from phloem.agents.delegation import AgentTool
    from phloem.config import Config
    from phloem.tools.contract import ToolContext

    news = {"fn": "phloem.examples.supplier_risk:fetch_news", "input_keys": ["company"]}
    data = {"services": {"disabled": ["echo"]}, "agents": {"functions": {"fetchNews": news}}}
    state = {"company": "ACME Components"}
    with Tree.start(msgspec.convert(data, Config), name="bench-delegation") as tree:
        direct = median_seconds(lambda: tree.run_agent("fetchNews", state=state), repeat=200)
        tool = AgentTool("fetchNews", lambda: tree.resources.delegate)
        args = {"input": "news", "state": state}
        delegated = median_seconds(lambda: tool.run(args, ToolContext()), repeat=200)
    return direct, delegated


def run() -> list[dict[str, Any]]:
    from phloem.agents import GoalOrientedPlanner

    floor = median_seconds(_raw_actor_lifetime, repeat=200)
    agent = PlannerAgent(
        "bench", "", SequentialPlanner, [FunctionAgent("f", "", lambda: 1, output_key="x")]
    )
    with SupervisedExecutor("bench") as executor:
        one = median_seconds(lambda: run_agent(agent, executor=executor), repeat=100)
        brief = PlannerAgent(
            "brief", "", lambda: GoalOrientedPlanner("brief", SUPPLIER), supplier_agents()
        )
        full = median_seconds(
            lambda: run_agent(brief, state={"company": "x"}, executor=executor), repeat=30
        )
    direct, delegated = _delegation()
    return [
        row(
            "agents.delegated_call",
            delegated * 1e6,
            "us",
            "tree.run_agent of the same agent",
            direct * 1e6,
            None,
        ),
        row(
            "agents.one_invocation_run", one * 1e6, "us", "pykka start+ask+stop", floor * 1e6, None
        ),
        row(
            "agents.supplier_brief_run", full * 1e6, "us", "pykka start+ask+stop", floor * 1e6, None
        ),
    ]
