"""Agent benchmarks: one supervised sub-agent invocation vs a raw pykka actor's lifetime,
and the supplier risk brief (4 groups, 5 agents) end to end in process."""

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
    return [
        row(
            "agents.one_invocation_run", one * 1e6, "us", "pykka start+ask+stop", floor * 1e6, None
        ),
        row(
            "agents.supplier_brief_run", full * 1e6, "us", "pykka start+ask+stop", floor * 1e6, None
        ),
    ]
