"""Shared builders for the agent tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from phloem.agents import (
    Agent,
    AgentMetadata,
    Event,
    EventActions,
    FunctionAgent,
    InvocationContext,
)

SUPPLIER = [
    AgentMetadata("fetchFilings", ["company"], "filings"),
    AgentMetadata("fetchNews", ["company"], "news"),
    AgentMetadata("analyzeFinancials", ["filings"], "financials"),
    AgentMetadata("assessRisk", ["financials", "news"], "risk"),
    AgentMetadata("writeBrief", ["company", "risk"], "brief"),
]
SUPPLIER_GROUPS = [
    ["fetchFilings", "fetchNews"],
    ["analyzeFinancials"],
    ["assessRisk"],
    ["writeBrief"],
]


def writer(name: str, key: str, value: Any = None, inputs: Sequence[str] = ()) -> FunctionAgent:
    """A FunctionAgent writing `value` (default: '<name> done') to `key`."""
    out = value if value is not None else f"{name} done"
    return FunctionAgent(name, f"writes {key}", lambda **_: out, input_keys=inputs, output_key=key)


def _echo(name: str) -> Callable[..., str]:
    def fn(**kw: Any) -> str:
        return f"{name}({','.join(sorted(kw))})"

    return fn


def supplier_agents(overrides: dict[str, Callable[..., Any]] | None = None) -> list[FunctionAgent]:
    agents = []
    for m in SUPPLIER:
        fn = (overrides or {}).get(m.agent) or (
            lambda _n=m.agent, **kw: f"{_n}({','.join(sorted(kw))})"
        )
        agents.append(FunctionAgent(m.agent, m.agent, fn, m.input_keys, m.output_key))
    return agents


class ScriptAgent(Agent):
    """Yields the given events (author filled in) — for exact event-order tests."""

    def __init__(self, name: str, events: Sequence[dict[str, Any]]) -> None:
        super().__init__(name, "scripted")
        self.script = list(events)
        self.calls = 0

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        self.calls += 1
        for spec in self.script:
            yield Event(
                author=self.name,
                actions=EventActions(
                    state_delta=dict(spec.get("delta", {})), escalate=spec.get("escalate", False)
                ),
            )
