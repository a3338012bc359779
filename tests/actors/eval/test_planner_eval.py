"""Evaluating a PlannerAgent scores its answer, never its status (seed 003: `Done` emits
nothing, so the last text is the sub-agent's answer)."""

from __future__ import annotations

import json

import pytest

from phloem.actors.eval.engine import EvalEngine
from phloem.actors.eval.options import EvalOptions
from phloem.agents import LlmAgent, PlannerAgent, SequentialPlanner
from phloem.models.scripted import ScriptedModel
from phloem.protocols.evalcriteria import Criteria, Criterion
from phloem.protocols.evalset import parse_evalset
from tests.actors.eval.fixtures import case, phloem_set

pytestmark = pytest.mark.timeout(60)


def test_an_exact_response_criterion_scores_the_planner_agents_answer() -> None:
    writer = LlmAgent("writer", "", ScriptedModel(["the answer"]))
    agent = PlannerAgent("plan", "", SequentialPlanner, [writer])
    doc = parse_evalset(
        json.dumps(phloem_set([case("c", {"input": "go", "expected_response": "the answer"})]))
    )
    report = EvalEngine(
        agent, doc, Criteria([Criterion("answer", "exact_response")]), EvalOptions()
    ).run()
    assert report.status == "passed" and report.metrics == {"answer": 1.0}
