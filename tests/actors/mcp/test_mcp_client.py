"""MCP servers built with the official SDK (MCPServer), reached through phloem's hub.

A stdio server runs as a supervised process child of the tree; a streamable-HTTP one
listens on loopback in a process of its own. See `servers.py` for their tools.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import psutil
import pytest

from phloem.actors.mcp.hub import McpHub
from phloem.actors.mcp.settings import McpConfig, McpServerConfig
from phloem.actors.mcp.tools import MAX_TOOLS_PER_SERVER, tool_name
from phloem.agents.llm_agent import LlmAgent
from phloem.config import Config, load_config
from phloem.models.scripted import ScriptedModel
from phloem.protocols.content import Content, ModelResponse, Part
from phloem.protocols.errors import PhloemError
from phloem.tools.contract import ToolContext
from phloem.tools.outputlimit import OutputPolicy
from phloem.tools.toolset import SourceToolset
from phloem.tree import Tree
from tests.actors.mcp.loopback import free_port, serving
from tests.helpers import ROOT, pids_alive, ps_args, tree_node, wait_until

pytestmark = pytest.mark.timeout(90)

SERVER = [sys.executable, "-m", "tests.actors.mcp.servers"]


def stdio(*extra: str, timeout_s: float = 10.0) -> McpServerConfig:
    return McpServerConfig(
        command=[*SERVER, "stdio", *extra],
        cwd=str(ROOT),
        timeout_s=timeout_s,
        connect_timeout_s=60.0,  # generous: a loaded machine starts Python slowly
    )


def tree_with(**servers: McpServerConfig) -> Tree:
    return Tree.start(Config(mcp=McpConfig(servers=servers)))


def tools_of(hub: McpHub, server: str) -> dict[str, object]:
    return {t.name: t for t in hub.tools([server])}


def child_ids(tree: Tree) -> list[str]:
    """Ids of every child in the tree snapshot (depth first)."""
    found: list[str] = []

    def walk(node: object) -> None:
        found.append(getattr(node, "id", ""))
        for child in getattr(node, "children", ()) or ():
            walk(child)

    for root in tree.snapshot().roots:
        walk(root)
    return found


def test_naming_maps_non_word_characters_and_cuts_to_64_bytes() -> None:
    assert tool_name("files", "read-file.v2") == "mcp__files__read_file_v2"
    assert tool_name("s", "é") == "mcp__s___"
    long = tool_name("server", "x" * 100)
    assert len(long.encode()) == 64 and long.startswith("mcp__server__x")


def test_stdio_server_connects_lazily_as_a_supervised_child_and_stops_with_the_tree() -> None:
    tree = tree_with(t=stdio())
    try:
        ctx = tree.resources.mcp
        assert isinstance(ctx, McpHub)
        assert "t" not in child_ids(tree)  # nothing runs before a tool is needed
        assert ctx.info()[0]["state"] == "idle"
        registry = tree.tool_registry()  # a tool need: connects
        assert "read" in registry.names()
        add = registry.get("mcp__t__add")
        assert add is not None and add.read_only is True
        echo = registry.get("mcp__t__echo")
        assert echo is not None and echo.read_only is False
        assert add.run({"a": 2, "b": 3}, ToolContext())["content"] == "5"
        assert add.run({"a": 2}, ToolContext())["error"] == "arguments"  # the one contract
        assert "t" in child_ids(tree)  # mcp/servers/t, visible in `phloem tree`
        pid = ctx.info()[0]["pid"]
        server_pid = int(registry.get("mcp__t__pid").run({}, ToolContext())["content"])
        assert psutil.Process(server_pid).ppid() == pid  # the program runs under the child
        with tree.client() as client:
            listed = client.list_mcp_servers()
        assert listed.servers[0].state == "connected"
        codes = {w.code for w in listed.warnings}
        assert {"mcp_name_collision", "mcp_schema_too_large"} <= codes
        names = {t.name for t in listed.servers[0].tools}
        assert "mcp__t__bad_name_" not in names  # `bad name!` and `bad_name_` collide
        assert "mcp__t__huge_schema" not in names
    finally:
        tree.stop()
    wait_until(lambda: not pids_alive(server_pid), what="the server outlived the tree")
    wait_until(lambda: not pids_alive(pid), what="the bridge outlived the tree")


def test_a_stdio_servers_own_pid_and_memory_are_in_the_tree_under_its_bridge() -> None:
    tree = tree_with(t=stdio())
    try:
        hub = tree.resources.mcp
        assert isinstance(hub, McpHub)
        pid_tool = tree.tool_registry().get("mcp__t__pid")
        assert pid_tool is not None
        server_pid = int(pid_tool.run({}, ToolContext())["content"])
        snapshot = tree.snapshot()
        bridge = tree_node(snapshot, "phloem/mcp/servers/t")
        assert bridge is not None and bridge.pid == hub.info()[0]["pid"]
        (server,) = bridge.children  # the bridge reported it before it served a byte
        assert (server.id, server.type, server.state) == (
            Path(SERVER[0]).name,
            "process",
            "running",
        )
        assert server.pid == server_pid != bridge.pid
        assert server.rss_bytes and server.rss_bytes > 0
        assert snapshot.processes == 2  # the bridge and its server
        assert ps_args(bridge.pid) == "phloem: mcp/servers/t"
        assert ps_args(server_pid) == " ".join(stdio().command)  # the server's own
    finally:
        tree.stop()


def test_bounds_tool_count_and_result_size() -> None:
    hub = McpHub(McpConfig(servers={"m": stdio("--many")}))
    try:
        tools = tools_of(hub, "m")
        assert len(tools) <= MAX_TOOLS_PER_SERVER
        assert "mcp_too_many_tools" in {w.code for w in hub.warnings.drain()}
        big = tools["mcp__m__big"]
        small = ToolContext(policy=OutputPolicy(max_bytes=1000))
        result = big.run({"n": 100_000}, small)  # type: ignore[attr-defined]
        assert result["truncated"] is True
        assert len(result["content"].encode()) < 1_500  # the kept bytes plus the marker
        assert "structured" not in result
    finally:
        hub.close()


def test_a_crashing_server_is_restarted_then_suppressed_after_three_failures() -> None:
    tree = tree_with(c=stdio())
    try:
        hub = tree.resources.mcp
        tools = tools_of(hub, "c")
        first = hub.server("c").pid
        crash = tools["mcp__c__crash"]
        failed = crash.run({}, ToolContext())  # type: ignore[attr-defined]
        assert failed["error"] == "server_failed"
        srv = hub.server("c")

        def restarted(n: int) -> bool:
            return srv.restarts == n and srv.state == "connected"

        wait_until(lambda: restarted(1), timeout=30, what="restart")
        assert srv.pid != first and not pids_alive(first)
        assert tools["mcp__c__echo"].run({"text": "back"}, ToolContext())["content"] == "back"  # type: ignore[attr-defined]
        # that completed call reset the count: three crashes in a row now suppress it
        for n in (2, 3):
            assert crash.run({}, ToolContext())["error"] == "server_failed"  # type: ignore[attr-defined]
            wait_until(lambda n=n: restarted(n), timeout=30, what=f"restart {n}")  # type: ignore[misc]
        assert crash.run({}, ToolContext())["error"] == "server_failed"  # type: ignore[attr-defined]
        wait_until(lambda: hub.server("c").state == "suppressed", timeout=30, what="suppress")
        assert "mcp_server_suppressed" in {w.code for w in hub.warnings.drain()}
        after = tools["mcp__c__echo"].run({"text": "x"}, ToolContext())  # type: ignore[attr-defined]
        assert after["error"] == "unavailable"
        assert "suppressed" in after["message"]
    finally:
        tree.stop()


def test_a_hanging_call_times_out_and_the_process_group_is_killed() -> None:
    tree = tree_with(h=stdio(timeout_s=1.5))
    try:
        hub = tree.resources.mcp
        tools = tools_of(hub, "h")
        bridge = hub.server("h").pid
        server_pid = int(tools["mcp__h__pid"].run({}, ToolContext())["content"])  # type: ignore[attr-defined]
        result = tools["mcp__h__hang"].run({"seconds": 60}, ToolContext())  # type: ignore[attr-defined]
        assert result["error"] == "timeout"
        wait_until(lambda: not pids_alive(server_pid), timeout=20, what="hung server killed")
        wait_until(lambda: not pids_alive(bridge), timeout=20, what="bridge killed")
        srv = hub.server("h")
        wait_until(lambda: srv.restarts == 1 and srv.state == "connected", timeout=30)
        assert tools["mcp__h__add"].run({"a": 1, "b": 1}, ToolContext())["content"] == "2"  # type: ignore[attr-defined]
    finally:
        tree.stop()


def test_an_llm_agent_calls_an_mcp_tool_through_a_scripted_model() -> None:
    tree = tree_with(t=stdio())
    try:
        model = ScriptedModel(
            [
                ModelResponse(
                    content=Content(
                        role="model",
                        parts=(Part.from_function_call("mcp__t__add", {"a": 20, "b": 22}),),
                    )
                ),
                "The sum is 42.",
            ]
        )
        agent = LlmAgent(
            "calc",
            "adds",
            model,
            "Use the tool.",
            output_key="answer",
            toolsets=[SourceToolset("mcp", lambda: tree.resources.mcp, ["t"])],
        )
        run = tree.run_agent(agent, input="20 + 22?")
        assert run.ok, run.outcome
        assert run.state["answer"] == "The sum is 42."
        declared = {d.name for d in model.requests[0].tools}
        assert "mcp__t__add" in declared
        answer = model.requests[1].contents[-1].parts[0].function_response
        assert answer is not None and answer.response["content"] == "42"
    finally:
        tree.stop()


def test_configured_llm_agents_name_their_mcp_servers(tmp_path: Path) -> None:
    text = (
        '[providers.p]\nprotocol = "gemini"\nmodel = "m"\n'
        '[agents.llm.a]\nprovider = "p"\nmcp_servers = ["nope"]\n'
    )
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(
        PhloemError, match=r"agents.llm.a.mcp_servers\[0\]: no MCP server named 'nope'"
    ):
        load_config(tmp_path / "c.toml", load_components=True)


def http_server(port: int, *extra: str) -> contextlib.AbstractContextManager[object]:
    return serving("tests.actors.mcp.servers", port, *extra, kind="http")


def test_streamable_http_server_and_a_broken_session_reconnects(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    hub = McpHub(McpConfig(servers={"web": McpServerConfig(url=url, timeout_s=5)}))
    try:
        with http_server(port):
            tools = tools_of(hub, "web")
            assert tools["mcp__web__add"].run({"a": 1, "b": 2}, ToolContext())["content"] == "3"  # type: ignore[attr-defined]
        with http_server(port):  # a new server process: the old session is gone
            first = tools["mcp__web__add"].run({"a": 1, "b": 2}, ToolContext())  # type: ignore[attr-defined]
            if "error" in first:  # the broken session is noticed and replaced
                wait_until(lambda: hub.server("web").restarts >= 1, timeout=30)
            wait_until(lambda: hub.server("web").state == "connected", timeout=30)
            again = tools_of(hub, "web")["mcp__web__echo"]
            assert again.run({"text": "hi"}, ToolContext())["content"] == "hi"  # type: ignore[attr-defined]
            assert hub.server("web").restarts >= 1
    finally:
        hub.close()


def test_a_configured_llm_agent_uses_its_mcp_servers_end_to_end() -> None:
    """`[agents.llm.calc] mcp_servers = ["t"]` on a provider served over loopback HTTP."""
    import json

    from phloem.config import parse_config
    from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

    with FakeProvider() as fake:
        fake.add(chat_calls(chat_tool_call("mcp__t__add", '{"a": 40, "b": 2}')), chat_text("42"))
        config = parse_config(f"""
[providers.fake]
protocol = "openai-chat"
model = "m"
base_url = "{fake.base_url}"
chat_token_limit = "max_tokens"

[mcp.servers.t]
command = {json.dumps(stdio().command)}
cwd = {json.dumps(str(ROOT))}

[agents.llm.calc]
provider = "fake"
instruction = "Use the tools."
output_key = "answer"
mcp_servers = ["t"]
""")
        tree = Tree.start(config)
        try:
            run = tree.run_agent("calc", input="40 + 2?")
            assert run.ok, run.outcome
            assert run.state["answer"] == "42"
            first, second = fake.requests
            declared = {t["function"]["name"] for t in first.json["tools"]}
            assert "mcp__t__add" in declared and "read" not in declared
            tool_message = second.json["messages"][-1]
            assert (
                tool_message["role"] == "tool"
                and json.loads(tool_message["content"])["content"] == "42"
            )
        finally:
            tree.stop()


def test_a_server_that_cannot_start_is_suppressed_and_contributes_no_tools() -> None:
    hub = McpHub(
        McpConfig(
            servers={
                "gone": McpServerConfig(command=["/nonexistent/mcp-server"], timeout_s=10),
                "ok": stdio(),
            }
        )
    )
    try:
        names = {t.name for t in hub.tools()}
        assert "mcp__ok__add" in names and not any(n.startswith("mcp__gone") for n in names)
        gone = hub.server("gone")
        assert gone.state == "suppressed" and gone.failures == 3
        codes = [w.code for w in hub.warnings.drain()]
        assert "mcp_server_suppressed" in codes and "mcp_server_unavailable" in codes
    finally:
        hub.close()


def test_a_broken_sse_stream_is_resumed_with_last_event_id_after_the_servers_retry() -> None:
    """The server closes a call's SSE stream mid-call (`resumable`); the SDK client under
    the hub reconnects with `Last-Event-ID`, waiting the server's `retry` (2.5 s, not its
    own 1 s default), and the call completes with the answer sent after the break."""
    from tests.actors.mcp.servers import RETRY_MS

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    hub = McpHub(McpConfig(servers={"web": McpServerConfig(url=url, timeout_s=60)}))
    try:
        with http_server(port):
            tools = tools_of(hub, "web")
            done = tools["mcp__web__resumable"].run({"seconds": 0.5}, ToolContext())  # type: ignore[attr-defined]
            assert done.get("content") == "resumed", (done, hub.server("web").last_error)
            seen = tools["mcp__web__resumes"].run({}, ToolContext())  # type: ignore[attr-defined]
    finally:
        hub.close()
    resumes = seen["structured"]["result"]
    print(f"\nresumption requests (server retry {RETRY_MS} ms): {resumes}")
    assert resumes, "the client never resumed the broken stream"
    first = resumes[0]
    assert first["last_event_id"].isdigit()  # an id of phloem's MemoryEventStore
    assert first["after_s"] >= RETRY_MS / 1000  # it waited the server's retry, at least
