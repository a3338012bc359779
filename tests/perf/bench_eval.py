"""Eval benchmark: cases per second for a 200-case set on a scripted model (the helpdesk
`LlmAgent`, one tool call and one answer a case), at concurrency 1 and 8, run through
`client.run_eval` on an embedded tree; the floor is the same 200 agent runs called
directly with `run_agent` in one thread (no eval service, sessions per run, no scoring).

The scripted model answers at once, so the run is CPU-bound under the GIL and
concurrency cannot help it; the `latency_10ms` figures give each model call 10 ms of
waiting (as a network call has) to show what concurrency buys when agents wait."""

from __future__ import annotations

import time
from typing import Any

from phloem import Tree
from phloem.agents import LlmAgent, run_agent
from phloem.agents.supervised import SupervisedExecutor
from phloem.config import parse_config
from phloem.examples.helpdesk_eval import TEMPERATURES_C, HelpdeskModel, get_weather, helpdesk
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.evalcriteria import default_criteria
from phloem.protocols.evalset import EvalCase, EvalSet, ToolCall, Turn
from tests.perf.common import row

CASES = 200
LATENCY_S = 0.010


class _SlowModel(HelpdeskModel):
    def generate(self, request: ModelRequest) -> ModelResponse:
        time.sleep(LATENCY_S)
        return super().generate(request)


def slow_helpdesk() -> LlmAgent:
    return LlmAgent("slow_helpdesk", "", _SlowModel(), tools=[get_weather])


def evalset() -> EvalSet:
    cities = sorted(TEMPERATURES_C)
    cases = []
    for i in range(CASES):
        city = cities[i % len(cities)].title()
        turn = Turn(
            "turn-1",
            f"What is the weather in {city}?",
            expected_response=f"It is {TEMPERATURES_C[city.lower()]} degrees Celsius in {city}.",
            expected_trajectory=[ToolCall("get_weather", {"city": city})],
        )
        cases.append(EvalCase(f"case-{i}", [turn]))
    return EvalSet("bench", "1", cases)


def _floor(doc: EvalSet, agent: LlmAgent) -> float:
    t0 = time.perf_counter()
    for case in doc.cases:
        with SupervisedExecutor("floor") as executor:
            run_agent(agent, input=case.turns[0].input, executor=executor)
    return CASES / (time.perf_counter() - t0)


def run() -> list[dict[str, Any]]:
    doc = evalset()
    config = parse_config(
        '[services]\ndisabled = ["echo"]\n'
        '[agents.components]\nhelpdesk = "phloem.examples.helpdesk_eval:helpdesk"\n'
    )
    rows = []
    with Tree.start(config) as tree, tree.client() as client:
        tree.register_agent(slow_helpdesk())
        client.run_eval(doc, agent="helpdesk", criteria=default_criteria())  # warm up
        for agent, label in (("helpdesk", ""), ("slow_helpdesk", "latency_10ms_")):
            floor = _floor(doc, helpdesk() if agent == "helpdesk" else slow_helpdesk())
            for concurrency in (1, 8):
                t0 = time.perf_counter()
                report = client.run_eval(
                    doc,
                    agent=agent,
                    criteria=default_criteria(),
                    concurrency=concurrency,
                    options={"timeout_s": 600},
                )
                rate = CASES / (time.perf_counter() - t0)
                assert report.status == "passed", report.counts
                rows.append(
                    row(
                        f"eval.{label}cases_per_s_concurrency_{concurrency}",
                        rate,
                        "cases/s",
                        "direct run_agent loop, one thread",
                        floor,
                        None,
                        higher_is_better=True,
                    )
                )
    return rows
