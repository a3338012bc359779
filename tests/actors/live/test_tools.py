"""Live tool calls run by phloem: sequential and concurrent policies, timeout, size and
failure answers, cancellation (the child is killed, nothing answered), managed calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from phloem.actors.live.fake_server import FakeLiveServer
from phloem.plugins import Plugin, PluginContext, Return, ToolCall
from phloem.protocols.errors import PhloemError
from tests.actors.live.conftest import TreeFactory, collect_until, next_kind, open_ready
from tests.helpers import raises_kind, wait_until

COMPONENTS = {
    "add": "tests.actors.live.tools_fixtures:add",
    "slow": "tests.actors.live.tools_fixtures:slow",
    "big": "tests.actors.live.tools_fixtures:big",
    "boom": "tests.actors.live.tools_fixtures:boom",
    "meet": "tests.actors.live.tools_fixtures:meet",
}
ALLOW = sorted(COMPONENTS)


def _call(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"toolCall": {"functionCalls": [{"id": i, "name": n, "args": a} for i, n, a in calls]}}


def _responses(server: FakeLiveServer) -> list[dict[str, Any]]:
    return [
        r
        for f in server.connection().frames
        if "toolResponse" in f
        for r in f["toolResponse"]["functionResponses"]
    ]


def test_sequential_calls_answer_in_order_with_failures_as_values(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    calls = {"timeout_s": 3.0, "max_response_bytes": 4096}
    with (
        live_tree(tools=ALLOW, calls=calls, components=COMPONENTS) as tree,
        tree.client() as client,
    ):
        _ref, events = open_ready(client)
        declared = server.connection().setup["tools"][0]["functionDeclarations"]
        assert {d["name"] for d in declared} == set(ALLOW)
        server.inject(
            _call(
                ("c1", "add", {"a": 2, "b": 3}),
                ("c2", "boom", {}),
                ("c3", "big", {}),
                ("c4", "slow", {"seconds": 60}),
                ("c5", "unmanaged", {}),
            )
        )
        call = next_kind(events, "tool_call")
        assert [c["managed"] for c in call.payload["calls"]] == [True] * 4 + [False]
        results = [next_kind(events, "tool_result", timeout=30) for _ in range(4)]
        assert [r.payload["id"] for r in results] == ["c1", "c2", "c3", "c4"]
        assert results[0].payload["response"] == {"sum": 5}
        failed = "tool_execution_failed"
        assert results[1].payload["response"] == {"error": failed, "type": "execution_failed"}
        assert results[2].payload["response"] == {"error": failed, "type": "response_too_large"}
        assert results[3].payload["response"] == {"error": failed, "type": "timeout"}
        wait_until(lambda: len(_responses(server)) == 4)
        assert [r["id"] for r in _responses(server)] == ["c1", "c2", "c3", "c4"]
        assert _responses(server)[0]["response"] == {"sum": 5}


def test_concurrent_calls_run_at_once(
    server: FakeLiveServer, live_tree: TreeFactory, tmp_path: Path
) -> None:
    calls = {"policy": "concurrent", "workers": 3, "timeout_s": 30.0}
    with (
        live_tree(tools=ALLOW, calls=calls, components=COMPONENTS) as tree,
        tree.client() as client,
    ):
        _ref, events = open_ready(client)
        folder = str(tmp_path)
        server.inject(
            _call(
                *[
                    (f"m{i}", "meet", {"folder": folder, "name": f"n{i}", "count": 3})
                    for i in range(3)
                ]
            )
        )
        results = [next_kind(events, "tool_result", timeout=30) for _ in range(3)]
        answers = sorted(r.payload["response"]["result"] for r in results)
        assert answers == ["n0", "n1", "n2"]  # only possible if all three ran together


def test_cancellation_kills_the_call_and_answers_nothing(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    calls = {"timeout_s": 60.0}
    with (
        live_tree(tools=ALLOW, calls=calls, components=COMPONENTS) as tree,
        tree.client() as client,
    ):
        ref, events = open_ready(client)
        server.inject(_call(("s1", "slow", {"seconds": 60})))
        next_kind(events, "tool_call")
        wait_until(lambda: client.live_status(ref)["tool_calls_in_flight"] == 1)
        # a manual answer to a call phloem runs itself is refused
        kind = raises_kind(
            client.live_send, ref, tool_responses=[{"id": "s1", "name": "slow", "response": {}}]
        )
        assert kind == "tool_call_managed_by_executor"
        server.inject({"toolCallCancellation": {"ids": ["s1"]}})
        cancelled = next_kind(events, "tool_call_cancellation")
        assert cancelled.payload == {"ids": ["s1"], "cancelled": 1}
        assert client.live_status(ref)["tool_calls_in_flight"] == 0
        # the session goes on; the cancelled call is never answered
        client.live_send(ref, text="next")
        seen = collect_until(events, "turn_complete")
        assert "tool_result" not in [e.kind for e in seen]
        assert _responses(server) == []


def test_reconnect_cancels_in_flight_calls(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    calls = {"timeout_s": 60.0}
    with (
        live_tree(tools=ALLOW, calls=calls, components=COMPONENTS) as tree,
        tree.client() as client,
    ):
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        wait_until(lambda: client.live_status(ref)["resumable"])
        server.inject(_call(("s1", "slow", {"seconds": 60})))
        wait_until(lambda: client.live_status(ref)["tool_calls_in_flight"] == 1)
        server.go_away("1s")
        reconnecting = next_kind(events, "reconnecting")
        assert reconnecting.payload["cancelled_tool_calls"] == 1
        next_kind(events, "ready")
        assert client.live_status(ref)["tool_calls_in_flight"] == 0


class _Guard(Plugin):
    """Sees every tool call; answers `add` itself (so it never runs) and lets others on."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []

    def before_tool(self, ctx: PluginContext, value: ToolCall) -> Any:
        self.seen.append((ctx.agent, value.name, dict(value.args)))
        if value.name == "add":
            return Return({"sum": -1, "by": "plugin"})
        return None


def test_managed_calls_go_through_the_tree_plugins(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    guard = _Guard()
    calls = {"timeout_s": 3.0}
    with live_tree(tools=ALLOW, calls=calls, components=COMPONENTS) as tree:
        tree.add_plugin("guard", guard, mode="intervene")
        with tree.client() as client:
            _ref, events = open_ready(client)
            server.inject(_call(("c1", "add", {"a": 2, "b": 3}), ("c2", "boom", {})))
            results = [next_kind(events, "tool_result", timeout=30) for _ in range(2)]
    by_id = {r.payload["id"]: r.payload["response"] for r in results}
    assert by_id["c1"] == {"sum": -1, "by": "plugin"}  # answered by the plugin, not run
    assert [(name, args) for _, name, args in guard.seen] == [
        ("add", {"a": 2, "b": 3}),
        ("boom", {}),
    ]
    assert all(agent.startswith("live-session-") for agent, _, _ in guard.seen)


def test_coding_tools_answer_by_the_names_they_have_everywhere(
    server: FakeLiveServer, live_tree: TreeFactory, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    (tmp_path / "sub").mkdir()
    with live_tree(tools=["ls", "read"], workdir=str(tmp_path)) as tree, tree.client() as client:
        _ref, events = open_ready(client)
        declared = server.connection().setup["tools"][0]["functionDeclarations"]
        assert [d["name"] for d in declared] == ["ls", "read"]
        server.inject(_call(("l1", "ls", {"path": "."}), ("r1", "read", {"path": "notes.txt"})))
        results = {
            r.payload["id"]: r.payload["response"]
            for r in (next_kind(events, "tool_result", timeout=30) for _ in range(2))
        }
        wait_until(lambda: len(_responses(server)) == 2)
    names = {entry["path"] for entry in results["l1"]["entries"]}
    assert {"notes.txt", "sub"} <= {name.rstrip("/") for name in names}
    assert "second line" in results["r1"]["content"]


def test_an_agent_named_in_agents_answers_as_a_run_of_its_own(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    news = {
        "fn": "phloem.examples.supplier_risk:fetch_news",
        "description": "Collects the latest news",
        "input_keys": ["company"],
        "output_key": "news",
    }
    catalogue = {"functions": {"fetchNews": news}}
    with (
        live_tree(catalogue=catalogue, agents=["fetchNews"]) as tree,
        tree.client() as client,
    ):
        _ref, events = open_ready(client)
        declared = server.connection().setup["tools"][0]["functionDeclarations"]
        assert [(d["name"], d["description"]) for d in declared] == [
            ("fetchNews", "Delegate to the agent fetchNews: Collects the latest news")
        ]
        args = {"input": "news", "state": {"company": "ACME Components"}}
        server.inject(_call(("n1", "fetchNews", args)))
        result = next_kind(events, "tool_result", timeout=30).payload["response"]
        assert result["agent"] == "fetchNews" and result["status"] == "done"
        assert len(result["state"]["news"]) == 3
        [run] = [r for r in client.list_runs() if r.name == "fetchNews"]
        assert run.outcome == "done" and "delegation:live" in run.owner


def test_a_workspace_tool_without_a_workdir_is_a_config_error(live_tree: TreeFactory) -> None:
    with pytest.raises(PhloemError) as err, live_tree(tools=["ls"]):
        pass
    assert "live.tools: ls need a workspace: set [live] workdir" in err.value.message
    with pytest.raises(PhloemError) as err, live_tree(tools=["nope"]):
        pass
    assert "live.tools: unknown tool 'nope'" in err.value.message


def test_config_check_names_a_bad_live_tool_with_its_line(tmp_path: Path) -> None:
    from phloem.config import load_config

    path = tmp_path / "c.toml"
    path.write_text('[live]\nmodel = "m"\ntools = ["ls", "nope"]\n')
    with pytest.raises(PhloemError) as err:
        load_config(path, load_components=True)
    assert err.value.message.startswith(f"{path}:3: live.tools: unknown tool 'nope'")
