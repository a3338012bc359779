"""`[tools]`: plasmid's tools block (call and session output bytes, bash default and
maximum timeouts) and the bash memory cap, applied wherever coding tools are built —
`[agents.llm]` agents and prompt commands included."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from phloem.actors.services import Resources
from phloem.agents.catalogue import build_catalogue
from phloem.config import Config, parse_config
from phloem.instructions.commands import PromptCommands
from phloem.instructions.settings import InstructionsConfig
from phloem.protocols.errors import PhloemError
from phloem.tools import ToolContext, Workspace
from phloem.tools.bash import BashTool
from phloem.tools.settings import BASH_TIMEOUT_RANGE_MS, ToolsConfig

pytestmark = pytest.mark.timeout(120)


def tools(**keys: object) -> ToolsConfig:
    return msgspec.convert(keys, ToolsConfig)


def test_the_defaults_are_plasmids() -> None:
    cfg = ToolsConfig()
    assert (cfg.call_output_bytes, cfg.session_output_bytes) == (30_000, 400_000)
    assert (cfg.bash_timeout_ms, cfg.bash_max_timeout_ms) == (120_000, 600_000)
    assert cfg.output_policy().max_bytes == 30_000 and cfg.budget().per_session == 400_000


def test_timeouts_are_checked_at_their_edges() -> None:
    low, high = BASH_TIMEOUT_RANGE_MS
    assert tools(bash_timeout_ms=low, bash_max_timeout_ms=high).bash_max_timeout_ms == high
    for bad in ({"bash_max_timeout_ms": high + 1}, {"bash_timeout_ms": low - 1}):
        with pytest.raises(msgspec.ValidationError):
            tools(**bad)
    assert tools(bash_timeout_ms=500, bash_max_timeout_ms=500).bash_timeout_ms == 500
    with pytest.raises(PhloemError, match="bash_timeout_ms"):
        parse_config("[tools]\nbash_timeout_ms = 501\nbash_max_timeout_ms = 500\n")
    for bad_bytes in ({"call_output_bytes": 0}, {"session_output_bytes": 0}):
        with pytest.raises(msgspec.ValidationError):
            tools(**bad_bytes)
    assert tools(call_output_bytes=1).output_policy().max_bytes == 1


def test_configured_bash_caps_a_call_and_declares_its_default(tmp_path: Path) -> None:
    config = parse_config(
        "[tools]\nbash_timeout_ms = 200\nbash_max_timeout_ms = 300\n"
        "bash_max_memory_bytes = 67108864\n"
    )
    bash = Resources().assembly(config).coding()["bash"]
    assert isinstance(bash, BashTool) and bash.max_memory_bytes == 64 * 1024**2
    schema = bash.declaration().parameters
    assert schema is not None and schema["properties"]["timeout_ms"]["default"] == 200
    assert BashTool.input_schema["properties"]["timeout_ms"]["default"] == 120_000  # untouched
    ctx = ToolContext(workspace=Workspace(tmp_path))
    asked_more = bash.run({"command": "sleep 30", "timeout_ms": 100_000}, ctx)
    assert asked_more["timed_out"] is True  # capped at bash_max_timeout_ms
    by_default = bash.run({"command": "sleep 30"}, ctx)
    assert by_default["timed_out"] is True


def test_the_agent_tool_context_has_the_configured_call_output(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 5_000 + "\n")
    config = msgspec.convert(
        {
            "tools": {"call_output_bytes": 200},
            "agents": {
                "llm": {"x": {"provider": "p", "tools": ["read", "bash"], "workdir": str(tmp_path)}}
            },
        },
        Config,
    )
    assembly = Resources().assembly(config)
    agent = build_catalogue(config.agents, lambda path: None, assembly=assembly).agent("x")
    read = next(t for t in agent.tools if t.name == "read")  # type: ignore[attr-defined]
    out = read.run({"path": "big.txt"}, agent.tool_context)  # type: ignore[attr-defined]
    assert out["truncated"] is True and len(out["content"].encode()) <= 200 + 200
    bash = next(t for t in agent.tools if t.name == "bash")  # type: ignore[attr-defined]
    assert bash.max_memory_bytes == Config().tools.bash_max_memory_bytes


def test_prompt_command_bash_gets_the_configured_memory_cap(tmp_path: Path) -> None:
    commands = PromptCommands(
        InstructionsConfig(),
        str(tmp_path),
        lambda *a, **k: None,
        tools(bash_max_memory_bytes=2**26),
    )
    assert commands._bash.max_memory_bytes == 2**26
    assert PromptCommands(InstructionsConfig(), None, print)._bash.max_memory_bytes == 2**31


def test_schema_accessors_return_copies() -> None:
    from phloem.tools.read import ReadTool

    tool = ReadTool()
    described = tool.describe()["input_schema"]
    assert described == ReadTool.input_schema and described is not tool.describe()["input_schema"]
    declared = tool.declaration().parameters
    assert declared is not None and declared is not ReadTool.input_schema
    declared["properties"]["path"]["type"] = "integer"  # a caller's change stays its own
    assert ReadTool.input_schema["properties"]["path"]["type"] == "string"
