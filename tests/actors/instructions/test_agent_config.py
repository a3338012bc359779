"""`[agents.llm.NAME]` tools, workdir, instructions and skills: what the registry builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from phloem.agents.llm_agent import LlmAgent
from phloem.agents.registry import build_registry
from phloem.config import Config
from phloem.instructions.settings import InstructionsConfig
from phloem.protocols.errors import PhloemError

pytestmark = pytest.mark.timeout(30)


def registry(tmp_path: Path, icfg: InstructionsConfig | None = None, **llm: object) -> Any:
    cfg = msgspec.convert({"agents": {"llm": {"coder": {"provider": "p", **llm}}}}, Config)
    return build_registry(cfg.agents, lambda path: None, instructions=icfg)


def test_coding_tools_by_name_on_a_workdir(tmp_path: Path) -> None:
    agent = registry(tmp_path, tools=["read", "bash", "read"], workdir=str(tmp_path)).get("coder")
    assert isinstance(agent, LlmAgent)
    assert [t.name for t in agent.tools] == ["read", "bash"]
    assert agent.tool_context.workspace.root == tmp_path.resolve()


def test_skills_add_the_skill_toolset_when_there_are_skills(tmp_path: Path) -> None:
    (tmp_path / "skills" / "s").mkdir(parents=True)
    (tmp_path / "skills" / "s" / "SKILL.md").write_text("---\ndescription: d\n---\nbody")
    cfg = InstructionsConfig(skill_roots=[str(tmp_path / "skills")])
    agent = registry(tmp_path, cfg, skills=True, workdir=str(tmp_path)).get("coder")
    assert [t.name for t in agent.tools] == ["list_skills", "load_skill"]
    empty = registry(tmp_path, InstructionsConfig(), skills=True, workdir=str(tmp_path))
    assert empty.get("coder").tools == ()


@pytest.mark.parametrize(
    ("llm", "message"),
    [
        ({"tools": ["read"]}, "tools, instructions and skills need a workdir"),
        ({"instructions": True}, "tools, instructions and skills need a workdir"),
        ({"tools": ["read"], "workdir": "/no/such/dir"}, "workdir is not a directory"),
        ({"tools": ["rm"], "workdir": "/"}, "unknown tools ['rm']"),
    ],
)
def test_bad_entries_are_config_errors_naming_the_agent(
    tmp_path: Path, llm: dict[str, object], message: str
) -> None:
    with pytest.raises(PhloemError) as err:
        registry(tmp_path, **llm)
    assert err.value.kind == "config_invalid"
    assert err.value.message.startswith("agents.llm.coder: ") and message in err.value.message
