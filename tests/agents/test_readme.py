"""The README's agents example runs as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(30)


def test_the_readme_agents_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Agents and planners", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    exec(compile(code.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert (
        "[['fetchFilings', 'fetchNews'], ['analyzeFinancials'], ['assessRisk'], ['writeBrief']]"
        in out
    )
    assert "done 5" in out
    assert "Risk level: HIGH (score 100/100)" in out


def test_every_public_agent_name_is_importable_from_phloem() -> None:
    import phloem

    names = [
        "Agent",
        "AgentMetadata",
        "AgentRun",
        "AStarSearch",
        "DfsSearch",
        "Done",
        "DoneWithResult",
        "Event",
        "FunctionAgent",
        "GoalOrientedPlanner",
        "LlmAgent",
        "LoopPlanner",
        "NoOp",
        "P2PPlanner",
        "ParallelPlanner",
        "Planner",
        "PlannerAction",
        "PlannerAgent",
        "PlannerOutcome",
        "ReplanPolicy",
        "RunAgents",
        "ScriptedModel",
        "SequentialPlanner",
        "Session",
        "SupervisorPlanner",
        "InMemorySessionService",
    ]
    for name in names:
        assert name in phloem.__all__, name
        assert getattr(phloem, name) is not None
