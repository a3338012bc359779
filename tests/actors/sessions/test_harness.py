"""The harness over a tree: turns with history, tool calls, usage, one run per session,
owner-bound runs, listing, showing and deleting."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import phloem
from phloem.actors.sessions.results import AskResult
from tests.helpers import raises_kind, wait_until
from tests.models.fake_provider import (
    FakeProvider,
    Reply,
    chat_calls,
    chat_text,
    chat_tool_call,
)


def test_two_turns_send_the_first_turn_as_history(
    tree: phloem.Tree, fake: FakeProvider, workspace: Path
) -> None:
    fake.add(
        chat_calls(chat_tool_call("read", json.dumps({"path": "hello.txt"}))),
        chat_text("It says hello world."),
        chat_text("Still hello world."),
    )
    with tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        first = client.session_ask(sid, "what is in hello.txt?")
        assert first.ok and first.text == "It says hello world."
        assert [c.name for c in first.tool_calls] == ["read"]
        assert first.tool_calls[0].response is not None
        assert "hello world" in first.tool_calls[0].response["content"]
        assert first.usage.input_tokens == 18 and first.model_calls == 2
        seen: list[str] = []
        second = client.session_run(sid, "and now?", on_event=lambda e: seen.append(e.text))
        assert second.text == "Still hello world." and seen == ["Still hello world."]
        assert Path(second.transcript).is_file()
    messages = fake.requests[-1].json["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert messages[1]["content"] == "what is in hello.txt?"
    assert messages[-1]["content"] == "and now?"


def test_a_busy_session_refuses_a_second_run_and_cancel_stops_the_first(
    tree: phloem.Tree, fake: FakeProvider, workspace: Path
) -> None:
    gate = threading.Event()
    fake.add(Reply(delay=30.0, gate=gate, body=b"{}", headers={}))
    with tree.client() as client, tree.client() as other:
        sid = client.session_new(workdir=str(workspace))
        started = client.session_start(sid, "hang")
        wait_until(lambda: len(fake.requests) == 1, what="the model call")
        assert raises_kind(other.session_start, sid, "again") == "session_busy"
        assert other.session_cancel(sid) is True
        result = client.session_follow(started, timeout=30)
        assert result.status == "cancelled" and result.error is not None
        assert result.error.kind == "cancelled"
        wait_until(lambda: not other.session_list()[0].busy, what="the run slot")
    gate.set()


def test_closing_the_client_cancels_its_run(
    tree: phloem.Tree, fake: FakeProvider, workspace: Path
) -> None:
    fake.add(Reply(delay=30.0, body=b"{}"))
    with tree.client() as watcher:
        client = tree.client()
        sid = client.session_new(workdir=str(workspace))
        client.session_start(sid, "hang")
        wait_until(lambda: len(fake.requests) == 1, what="the model call")
        assert watcher.session_list()[0].busy
        client.close()
        wait_until(lambda: not watcher.session_list()[0].busy, timeout=5, what="the cancel")


def test_list_show_delete(tree: phloem.Tree, fake: FakeProvider, workspace: Path) -> None:
    fake.add(chat_text("hi"))
    with tree.client() as client:
        sid = client.session_new(workdir=str(workspace), session_id="mine")
        assert sid == "mine"
        assert raises_kind(client.session_new, workdir=str(workspace), session_id="mine") == (
            "session_exists"
        )
        client.session_ask(sid, "hello")
        [summary] = client.session_list()
        assert (summary.id, summary.agent, summary.workdir) == ("mine", "coder", str(workspace))
        detail = client.session_show(sid)
        assert detail.event_count == 2 and [e.author for e in detail.events] == ["user", "coder"]
        assert client.session_delete(sid) is True
        assert client.session_list() == []
        assert raises_kind(client.session_show, sid) == "unknown_session"
        assert raises_kind(client.session_ask, sid, "x") == "unknown_session"
        assert raises_kind(client.session_new, agent="nobody") == "unknown_agent"
        assert raises_kind(client.session_new, workdir="relative") == "invalid_argument"


def test_a_missing_key_says_which_variable_to_set(tmp_path: Path, workspace: Path) -> None:
    from phloem.config import parse_config

    config = parse_config(
        f"""
[providers.gem]
protocol = "gemini"
model = "gemini-x"
api_key_env = "PHLOEM_TEST_UNSET_KEY"
[sessions]
dir = "{tmp_path / "store"}"
[agents.llm.coder]
harness = true
provider = "gem"
"""
    )
    with phloem.Tree.start(config) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        result: AskResult = client.session_ask(sid, "hello")
        assert result.status == "failed" and result.error is not None
        assert "PHLOEM_TEST_UNSET_KEY" in result.error.message


def test_a_repaired_tail_comes_back_in_the_next_ask_result(
    fake: FakeProvider, workspace: Path, tmp_path: Path
) -> None:
    from phloem.config import parse_config
    from tests.actors.sessions.conftest import harness_config

    config = parse_config(harness_config(fake.base_url, tmp_path / "store"))
    fake.add(chat_text("one"), chat_text("two"))
    with phloem.Tree.start(config) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        path = Path(client.session_ask(sid, "first").transcript)
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # a crash in the middle of the last append
    with phloem.Tree.start(config) as tree, tree.client() as client:
        result = client.session_ask(sid, "second")
    [warning] = result.warnings
    # line 5: header, turn marker, prompt, answer, then the turn's end marker, torn
    assert (warning.code, warning.path, warning.line) == ("session_tail_repaired", str(path), 5)
    assert result.text == "two"
    # the turn's answer was acknowledged: the turn is marked ended, the model not asked
    assert len(fake.requests) == 2
    messages = fake.requests[-1].json["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]


def test_an_unanswered_call_is_closed_as_interrupted() -> None:
    from phloem.agents.conversation import INTERRUPTED, close_calls
    from phloem.protocols.content import Content, Part

    call = Content(role="model", parts=(Part.from_function_call("bash", {"command": "x"}, "c1"),))
    history = close_calls([Content.user("go"), call, Content.user("again")])
    assert len(history) == 4
    [response] = history[2].parts
    assert response.function_response is not None
    assert (response.function_response.id, response.function_response.response) == (
        "c1",
        INTERRUPTED,
    )
    answered = Content(role="user", parts=(Part.from_function_response("bash", {}, "c1"),))
    assert close_calls([call, answered]) == [call, answered]


def test_a_streaming_provider_streams_text_and_stores_only_the_whole_reply(
    fake: FakeProvider, workspace: Path, tmp_path: Path
) -> None:
    from phloem.config import parse_config
    from tests.models.fake_provider import gemini_parts, sse_reply

    config = parse_config(
        f"""
[providers.gem]
protocol = "gemini"
model = "g"
base_url = "{fake.base_url}"
max_retries = 0
[sessions]
dir = "{tmp_path / "store"}"
[agents.llm.coder]
harness = true
provider = "gem"
"""
    )
    fake.add(
        sse_reply(
            [
                gemini_parts([{"text": "Hel"}], finish=None),
                gemini_parts([{"text": "lo, "}], finish=None),
                gemini_parts([{"text": "world."}]),
            ]
        )
    )
    with phloem.Tree.start(config) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        seen: list[tuple[bool, str]] = []
        result = client.session_run(
            sid, "greet", on_event=lambda e: seen.append((e.partial, e.text))
        )
        assert result.text == "Hello, world."
        assert seen == [(True, "Hel"), (True, "lo, "), (True, "world."), (False, "Hello, world.")]
        assert [e.text for e in client.session_show(sid).events] == ["greet", "Hello, world."]
    assert fake.requests[0].path.endswith(":streamGenerateContent")
