"""Tool policy and the per-run interceptors, in process: allow/deny (denials win), the
model sees only allowed tools, refused calls never run, skills narrow the turn, and the
instructions reach the model request in order and activate on touch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from phloem.agents import LlmAgent
from phloem.agents.runner import run_agent
from phloem.agents.supervised import SupervisedExecutor
from phloem.instructions.context import (
    InstructionsInterceptor,
    run_interceptors,
    touched_paths,
)
from phloem.instructions.discovery import InstructionContext
from phloem.instructions.policy import ToolPolicy, ToolPolicyInterceptor, TurnPolicy
from phloem.instructions.settings import InstructionsConfig
from phloem.instructions.skills import SkillCatalog, skill_tools
from phloem.models import ScriptedModel
from phloem.models.interceptors import Interceptors, ToolCall
from phloem.protocols.content import ModelResponse, Part
from phloem.protocols.errors import PhloemError
from phloem.tools import ToolContext, Workspace, default_registry
from tests.actors.instructions.conftest import Trees

pytestmark = pytest.mark.timeout(60)


def calls(*pairs: tuple[str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse.from_parts([Part.from_function_call(n, a) for n, a in pairs])


def answers(run: Any) -> list[dict[str, Any]]:
    out = []
    for event in run.events:
        for part in event.content.parts if event.content else ():
            if part.function_response is not None:
                out.append(part.function_response.response)
    return out


def coder(root: Path, model: ScriptedModel, extra: list[Any] | None = None) -> LlmAgent:
    tools = list(default_registry().tools()) + (extra or [])
    return LlmAgent(
        "coder",
        "",
        model,
        "You are a careful coder.",
        tools,
        tool_context=ToolContext(workspace=Workspace(root)),
    )


def run(agent: LlmAgent, interceptors: list[Any], prompt: str = "go") -> Any:
    with SupervisedExecutor("policy-test") as executor:
        return run_agent(
            agent, input=prompt, executor=executor, interceptors=Interceptors(interceptors)
        )


def test_policies_intersect_and_denials_win() -> None:
    a = ToolPolicy.of(["read", "write", "bash"], ["bash"])
    b = ToolPolicy.of(["read", "bash", "grep"])
    both = a.intersect(b)
    assert both == ToolPolicy(frozenset({"read", "bash"}), frozenset({"bash"}))
    assert both.allows("read") and not both.allows("bash") and not both.allows("write")
    assert ToolPolicy().intersect(ToolPolicy.of(None, ["ls"])).allows("read")
    assert not ToolPolicy.of([]).allows("read")  # an explicit empty allow list: nothing


def test_policy_names_are_checked() -> None:
    with pytest.raises(PhloemError, match="not a tool name"):
        ToolPolicy.of(["rm -rf"])
    with pytest.raises(PhloemError, match="list of tool names"):
        ToolPolicy.of("read")
    with pytest.raises(PhloemError, match="at most 1024"):
        ToolPolicy.of([f"t{i}" for i in range(1025)])
    assert len(ToolPolicy.of([f"t{i}" for i in range(1024)]).allow or ()) == 1024


def test_a_denied_call_answers_denied_and_the_tool_never_runs(tmp_path: Path) -> None:
    model = ScriptedModel([calls(("write", {"path": "x.txt", "content": "hi"})), "done"])
    agent = coder(tmp_path, model)
    result = run(agent, [ToolPolicyInterceptor(ToolPolicy.of(None, ["write"]))])
    assert answers(result) == [
        {"error": "denied", "message": "tool 'write' is not allowed by the tool policy"}
    ]
    assert not (tmp_path / "x.txt").exists()
    declared = [t.name for t in model.requests[0].tools]
    assert "write" not in declared and "read" in declared  # the model is not offered it


def test_an_allow_list_offers_and_runs_only_its_tools(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    model = ScriptedModel(
        [calls(("read", {"path": "a.txt"}), ("bash", {"command": "touch b"})), "done"]
    )
    result = run(coder(tmp_path, model), [ToolPolicyInterceptor(ToolPolicy.of(["read", "ls"]))])
    read, bash = answers(result)
    assert read["content"] == "     1\tA\n" and bash["error"] == "denied"
    assert not (tmp_path / "b").exists()
    assert sorted(t.name for t in model.requests[0].tools) == ["ls", "read"]


def test_a_loaded_skill_narrows_the_rest_of_the_turn(trees: Trees) -> None:
    trees.write(
        "skills/review/SKILL.md", "---\ndescription: Review\nallowed-tools: [Read]\n---\nBe terse."
    )
    catalog = SkillCatalog(InstructionsConfig(skill_roots=[str(trees.base / "home/skills")]))
    assert len(catalog) == 0  # no such root: nothing (and a warning)
    catalog = SkillCatalog(InstructionsConfig(skill_roots=[str(trees.ws / "skills")]))
    model = ScriptedModel(
        [
            calls(("load_skill", {"name": "review"})),
            calls(
                ("bash", {"command": "touch made"}), ("read", {"path": "skills/review/SKILL.md"})
            ),
            "done",
        ]
    )
    policy = TurnPolicy()
    result = run(coder(trees.ws, model, skill_tools(catalog)), [ToolPolicyInterceptor(policy)])
    loaded, bash, read = answers(result)
    assert loaded["body"] == "Be terse." and loaded["tool_policy"]["allow"] == ["read"]
    assert bash["error"] == "denied" and "content" in read
    assert not (trees.ws / "made").exists()
    assert [t.name for t in model.requests[2].tools] == ["read"]
    assert policy.current.allow == frozenset({"read"})


def test_an_unreadable_narrowing_denies_everything() -> None:
    policy = TurnPolicy()
    interceptor = ToolPolicyInterceptor(policy)
    info = None
    result = interceptor.tool_call(
        info,  # type: ignore[arg-type]
        ToolCall("odd", {}),
        lambda call: {"ok": True, "tool_policy": {"allow": ["not a name!"]}},
    )
    assert result["ok"] is True
    assert policy.current.allow == frozenset()


def test_instructions_reach_the_model_after_its_own_instruction_in_order(trees: Trees) -> None:
    trees.write("~/.codex/AGENTS.md", "USER-LEVEL")
    trees.write("AGENTS.md", "ROOT-LEVEL")
    trees.write("src/AGENTS.md", "NESTED-LEVEL")
    trees.write("src/main.py", "print(1)\n")
    model = ScriptedModel([calls(("read", {"path": "src/main.py"})), "done"])
    context = InstructionContext(trees.ws)
    result = run(coder(trees.ws, model), run_interceptors(context=context))
    assert result.outcome.status == "done"
    first, second = (r.system_instruction or "" for r in model.requests)
    assert first.startswith("You are a careful coder.\n\nInstructions from ~/.codex/AGENTS.md")
    assert first.index("USER-LEVEL") < first.index("ROOT-LEVEL") and "NESTED" not in first
    # the read of src/main.py activated src/AGENTS.md for the next model call, in its place
    assert second.index("USER-LEVEL") < second.index("ROOT-LEVEL") < second.index("NESTED-LEVEL")


def test_front_matter_of_active_instructions_joins_the_policy(trees: Trees) -> None:
    trees.write("AGENTS.md", "---\ndisallowed-tools: [Bash]\n---\nno shell here")
    model = ScriptedModel([calls(("bash", {"command": "touch x"})), "done"])
    context = InstructionContext(trees.ws)
    result = run(coder(trees.ws, model), run_interceptors(context=context))
    assert answers(result)[0]["error"] == "denied"
    assert not (trees.ws / "x").exists()


def test_touched_paths_come_from_arguments_and_results() -> None:
    call = ToolCall("grep", {"pattern": "x", "path": "src"})
    result = {
        "matches": [{"path": "src/a.py"}, {"path": "src/b.py"}, {"path": "src/a.py"}],
        "paths": ["lib/c.py"],
        "entries": [{"path": "d"}],
    }
    assert touched_paths(call, result) == ["src", "lib/c.py", "src/a.py", "src/b.py", "d"]
    assert touched_paths(call, {"error": "missing", "message": ""}) == []


def test_at_most_256_touches_per_tool_call_activate_instructions(trees: Trees) -> None:
    for i in range(258):
        trees.write(f"d{i:03}/AGENTS.md", f"dir {i}")
    context = InstructionContext(trees.ws)
    interceptor = InstructionsInterceptor(context)
    paths = [{"path": f"d{i:03}/f"} for i in range(258)]
    interceptor.tool_call(
        None,  # type: ignore[arg-type]
        ToolCall("find", {"glob": "*"}),
        lambda call: {"entries": paths},
    )
    assert len(context.documents()) == 256
    assert [w.code for w in context.warnings.drain()] == ["instructions_touch_limit"]
