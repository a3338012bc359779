"""The one agent catalogue and the one tool assembly: `[agents.llm.NAME]` capabilities,
the harness defaults, component tools, and the same tools on every surface."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from phloem.actors.services import Resources
from phloem.agents.assembly import ToolAssembly
from phloem.agents.catalogue import AgentCatalogue, build_catalogue
from phloem.agents.conversation import DEFAULT_CODING_INSTRUCTION, ConversationAgent
from phloem.agents.llm_agent import LlmAgent
from phloem.agents.preparation import SessionPlace, prepare
from phloem.agents.settings import CODING_TOOLS
from phloem.base.settings import load_component
from phloem.config import Config, load_config
from phloem.instructions.policy import ToolPolicy, ToolPolicyInterceptor
from phloem.instructions.settings import InstructionsConfig
from phloem.models.interceptors import CallInfo
from phloem.protocols.errors import PhloemError
from phloem.tools.contract import FunctionTool, ToolContext
from phloem.tools.workspace import Workspace

pytestmark = pytest.mark.timeout(30)

FIXTURES = "tests.actors.agents.tool_fixtures"


def catalogue(
    icfg: InstructionsConfig | None = None,
    components: dict[str, str] | None = None,
    servers: tuple[str, ...] = (),
    **llm: object,
) -> AgentCatalogue:
    cfg = msgspec.convert({"agents": {"llm": {"coder": {"provider": "p", **llm}}}}, Config)
    assembly = ToolAssembly(
        components=components,
        load=lambda path: load_component(path, what="tool"),
        mcp_servers=servers,
        instructions=icfg,
    )
    return build_catalogue(cfg.agents, lambda path: None, assembly=assembly)


def test_coding_tools_by_name_on_a_workdir(tmp_path: Path) -> None:
    agent = catalogue(tools=["read", "bash", "read"], workdir=str(tmp_path)).agent("coder")
    assert isinstance(agent, LlmAgent)
    assert [t.name for t in agent.tools] == ["read", "bash"]
    assert agent.tool_context.workspace is not None
    assert agent.tool_context.workspace.root == tmp_path.resolve()


def test_skills_add_the_skill_tools_when_there_are_skills(tmp_path: Path) -> None:
    (tmp_path / "skills" / "s").mkdir(parents=True)
    (tmp_path / "skills" / "s" / "SKILL.md").write_text("---\ndescription: d\n---\nbody")
    cfg = InstructionsConfig(skill_roots=[str(tmp_path / "skills")])
    agent = catalogue(cfg, skills=True, workdir=str(tmp_path)).agent("coder")
    assert [t.name for t in agent.tools] == ["list_skills", "load_skill", "load_skill_resource"]  # type: ignore[attr-defined]
    empty = catalogue(InstructionsConfig(), skills=True, workdir=str(tmp_path))
    assert empty.agent("coder").tools == ()  # type: ignore[attr-defined]


def test_the_harness_preset_fills_what_is_left_unset(tmp_path: Path) -> None:
    cat = catalogue(servers=("files",), harness=True, workdir=str(tmp_path))
    spec = cat.llm_spec("coder")
    assert spec.tools == CODING_TOOLS
    assert spec.mcp_servers is None  # every configured server
    assert (spec.instructions, spec.skills, spec.templates) == (True, True, True)
    assert spec.max_tool_rounds == 50
    agent = cat.agent("coder")
    assert isinstance(agent, LlmAgent)
    assert [t.name for t in agent.tools] == list(CODING_TOOLS)
    assert agent.instruction == DEFAULT_CODING_INSTRUCTION
    assert [ts.servers for ts in agent.toolsets] == [["files"]]  # type: ignore[attr-defined]
    own = catalogue(
        servers=("files",),
        harness=True,
        workdir=str(tmp_path),
        tools=["ls"],
        instruction="Be brief.",
        skills=False,
        max_tool_rounds=3,
    )
    spec = own.llm_spec("coder")
    assert (spec.tools, spec.skills, spec.max_tool_rounds) == (("ls",), False, 3)
    assert own.agent("coder").instruction == "Be brief."  # type: ignore[attr-defined]


def test_a_plain_llm_agent_has_no_capabilities_unless_named() -> None:
    spec = catalogue().llm_spec("coder")
    assert spec.tools == () and spec.mcp_servers == ()
    assert not (spec.instructions or spec.skills or spec.templates)
    assert spec.max_tool_rounds == 10


def test_an_agent_that_needs_a_workspace_and_has_none_runs_only_in_a_session(
    tmp_path: Path,
) -> None:
    cat = catalogue(harness=True)
    assert cat.names() == ["coder"]
    with pytest.raises(PhloemError) as err:
        cat.agent("coder")
    assert err.value.kind == "invalid_argument" and "runs only in a session" in err.value.message
    place = SessionPlace(ToolContext(workspace=Workspace(tmp_path), session="s1"))
    prep = prepare(cat, "coder", session=place)
    assert isinstance(prep.agent, ConversationAgent)
    assert prep.agent.tool_context.workspace is not None
    assert prep.agent.tool_context.workspace.root == tmp_path.resolve()
    assert [t.name for t in prep.agent.tools] == list(CODING_TOOLS)


def test_component_tools_are_named_by_their_key(tmp_path: Path) -> None:
    components = {"lookup": f"{FIXTURES}:find_thing", "stamp": f"{FIXTURES}:STAMP"}
    agent = catalogue(components=components, tools=["lookup", "stamp", "ls"], workdir=str(tmp_path))
    tools = agent.agent("coder").tools  # type: ignore[attr-defined]
    assert [t.name for t in tools] == ["lookup", "stamp", "ls"]
    assert isinstance(tools[0], FunctionTool)
    assert tools[0].run({"what": "key"}, ToolContext()) == {"found": "key"}
    assert tools[0].description == "Find a thing by name."


@pytest.mark.parametrize(
    ("llm", "components", "message"),
    [
        ({"tools": ["read"], "workdir": "/no/such/dir"}, {}, "workdir is not a directory"),
        ({"tools": ["rm"], "workdir": "/"}, {}, "unknown tool 'rm' (known: read, write"),
        ({"tools": ["x"], "workdir": "/"}, {"x": f"{FIXTURES}:MISNAMED"}, "a Tool named 'y'"),
        ({"tools": ["x"], "workdir": "/"}, {"x": f"{FIXTURES}:NOT_A_TOOL"}, "neither a Tool"),
        ({"mcp_servers": ["nope"]}, {}, "no MCP server named 'nope'"),
    ],
)
def test_bad_entries_are_config_errors_naming_the_agent(
    llm: dict[str, object], components: dict[str, str], message: str
) -> None:
    with pytest.raises(PhloemError) as err:
        catalogue(components=components, **llm)
    assert err.value.kind == "config_invalid"
    assert err.value.message.startswith("agents.llm.coder: ") and message in err.value.message


def test_the_moved_sessions_agents_table_is_one_line_saying_where_it_went(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[providers.p]\nprotocol = "gemini"\nmodel = "m"\n\n'
        '[sessions.agents.coder]\nprovider = "p"\n'
    )
    with pytest.raises(PhloemError) as err:
        load_config(path)
    assert err.value.kind == "config_invalid"
    assert err.value.message.startswith(f"{path}:5: sessions.agents: moved: ")
    assert "[agents.llm.NAME]" in err.value.message
    path.write_text('[live.tools]\nallow = ["add"]\n')
    with pytest.raises(PhloemError) as err:
        load_config(path)
    assert "live.tools.allow: moved: name the tools in [live] tools" in err.value.message


def test_config_check_refuses_an_unknown_tool_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[providers.p]\nprotocol = "gemini"\nmodel = "m"\n\n'
        f'[agents.llm.a]\nprovider = "p"\ntools = ["nope"]\nworkdir = "{tmp_path}"\n'
    )
    with pytest.raises(PhloemError) as err:
        load_config(path, load_components=True)
    assert "agents.llm.a: unknown tool 'nope'" in err.value.message


def test_the_run_prep_narrows_by_each_configured_agent_and_the_request(tmp_path: Path) -> None:
    cat = catalogue(tools=["read", "ls"], workdir=str(tmp_path), tools_deny=["read"])
    prep = prepare(cat, "coder", policy=ToolPolicy.of(["ls", "read", "find"]))
    [policy] = prep.own()
    assert isinstance(policy, ToolPolicyInterceptor)
    request = policy.effective()
    assert request.allows("ls") and request.allows("read") and not request.allows("write")
    own = policy.effective(CallInfo(kind="tool", agent="coder", target="read"))
    assert not own.allows("read") and own.allows("ls")


def test_resources_make_one_assembly_from_the_config(tmp_path: Path) -> None:
    config = msgspec.convert(
        {
            "components": {"lookup": f"{FIXTURES}:find_thing"},
            "tools": {"bash_max_memory_bytes": 2**27},
        },
        Config,
    )
    assembly = Resources().assembly(config)
    names = [t.name for t in assembly.named(["lookup", "bash"])]
    assert names == ["lookup", "bash"]
    assert assembly.coding()["bash"].max_memory_bytes == 2**27  # type: ignore[attr-defined]
    assert assembly.is_component("lookup") and not assembly.is_component("bash")
    assert assembly.registry().names() == list(CODING_TOOLS)


def test_host_tools_come_after_the_coding_tools_and_mcp_after_both(tmp_path: Path) -> None:
    """plasmid's WithTools appends host tools after the built-in coding tools; phloem's one
    `tools` list names them after the coding tools, and MCP toolsets come after both."""
    cat = catalogue(
        components={"lookup": f"{FIXTURES}:find_thing"},
        servers=("m",),
        harness=True,
        tools=[*CODING_TOOLS, "lookup"],
        workdir=str(tmp_path),
    )
    agent = cat.agent("coder")
    assert isinstance(agent, LlmAgent)
    assert [t.name for t in agent.tools] == [*CODING_TOOLS, "lookup"]
    assert [t.name for t in agent.toolsets] == ["mcp:m"]
