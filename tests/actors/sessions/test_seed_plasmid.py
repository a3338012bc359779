"""Seed 001 (plasmid) contracts of a session's turn, over a real tree and a local fake
provider: the agent's generate config reaches the provider, the `[tools]` limits apply in
a turn, ..."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

import phloem
from phloem.agents.context import InvocationContext
from phloem.agents.llm_agent import LlmAgent
from phloem.config import parse_config
from phloem.models.scripted import ScriptedModel
from phloem.protocols.content import GenerateConfig, ThinkingConfig
from phloem.protocols.errors import PhloemError
from tests.actors.sessions.conftest import harness_config
from tests.helpers import wait_until
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call


def start(fake: FakeProvider, tmp_path: Path, coder: str = "", rest: str = "") -> phloem.Tree:
    text = harness_config(fake.base_url, tmp_path / "store", coder) + rest
    return phloem.Tree.start(parse_config(text))


def test_max_output_tokens_and_temperature_reach_the_provider(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    fake.add(chat_text("ok"))
    coder = "max_output_tokens = 77\ntemperature = 0.25\n"
    with start(fake, tmp_path, coder) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_ask(sid, "hi").ok
    body = fake.requests[-1].json
    assert body["max_tokens"] == 77 and body["temperature"] == 0.25


def test_an_llm_agent_sends_its_generate_config_with_every_request() -> None:
    model = ScriptedModel(["done"])
    thinking = ThinkingConfig(include_thoughts=True, thinking_budget=512)
    config = GenerateConfig(temperature=0.5, thinking_config=thinking, max_output_tokens=9)
    agent = LlmAgent("a", "", model, generate_config=config, max_output_tokens=64)
    list(agent.run(InvocationContext()))
    [request] = model.requests
    assert request.config.temperature == 0.5 and request.config.thinking_config == thinking
    assert request.config.max_output_tokens == 64  # the keyword wins over the config's


def test_agents_llm_thinking_keys_make_the_thinking_config() -> None:
    config = parse_config(
        '[agents.llm.a]\nprovider = "p"\nthinking_budget = -1\ninclude_thoughts = true\n'
        "temperature = 2.0\n"
    )
    made = config.agents.llm["a"].generate_config()
    assert made.thinking_config == ThinkingConfig(include_thoughts=True, thinking_budget=-1)
    assert made.temperature == 2.0 and made.max_output_tokens is None
    for bad in ("temperature = 2.01", "thinking_budget = -2"):
        with pytest.raises(PhloemError):
            parse_config(f'[agents.llm.a]\nprovider = "p"\n{bad}\n')


def test_abandoning_a_turns_event_stream_cancels_its_run(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    """plasmid: stopping iteration early cancels the run and releases its session."""
    marker = workspace / "marker"
    command = json.dumps({"command": f"sleep 5; echo done > {marker}"})
    fake.add(chat_calls(chat_tool_call("bash", command)), chat_text("after"), chat_text("next"))

    class Stop(Exception):
        pass

    def stop(event: object) -> None:
        raise Stop

    with start(fake, tmp_path) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        with pytest.raises(Stop):
            client.session_run(sid, "run it", on_event=stop)
        wait_until(lambda: not client.session_list()[0].busy, what="the session released")
        assert client.session_ask(sid, "again").ok  # not session_busy
    time.sleep(6)  # past the command's own end: it was stopped, not left to finish
    assert not marker.exists()


def tool_names(request_body: dict[str, object]) -> set[str]:
    return {t["function"]["name"] for t in request_body.get("tools", [])}  # type: ignore[attr-defined,index]


def tool_answers(fake: FakeProvider) -> dict[str, object]:
    out: dict[str, object] = {}
    for request in fake.requests:
        for m in request.json["messages"]:
            if m["role"] == "tool":
                out[m["tool_call_id"]] = json.loads(m["content"])
    return out


def test_a_loaded_skill_narrows_the_turn_with_instructions_off(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    skills = tmp_path / "skills"
    (skills / "ro").mkdir(parents=True)
    (skills / "ro/SKILL.md").write_text(
        "---\ndescription: Read only\nallowed-tools: [Read]\n---\nRead."
    )
    fake.add(
        chat_calls(chat_tool_call("load_skill", json.dumps({"name": "ro"}), "c1")),
        chat_calls(chat_tool_call("bash", json.dumps({"command": "touch ran.txt"}), "c2")),
        chat_text("done"),
    )
    rest = f'\n[instructions]\nskill_roots = ["{skills}"]\n'
    with start(fake, tmp_path, "instructions = false\n", rest) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_ask(sid, "go").ok
    assert not (workspace / "ran.txt").exists()
    assert tool_answers(fake)["c2"] == {
        "error": "denied",
        "message": "tool 'bash' is not allowed by the tool policy",
    }
    assert "bash" in tool_names(fake.requests[0].json)
    assert tool_names(fake.requests[1].json) == {"read"}


def test_a_templates_allowed_tools_narrow_the_turn_that_expands_it(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "peek.md").write_text("---\nallowed-tools: Read, LS\n---\nLook at {{1}}.")
    fake.add(
        chat_calls(chat_tool_call("bash", json.dumps({"command": "touch ran.txt"}), "c1")),
        chat_text("done"),
    )
    rest = f'\n[instructions]\ntemplate_roots = ["{templates}"]\n'
    with start(fake, tmp_path, "", rest) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_ask(sid, "/peek hello.txt").ok
    first = fake.requests[0].json
    assert first["messages"][-1]["content"] == "Look at hello.txt."
    assert tool_names(first) == {"read", "ls"}
    assert tool_answers(fake)["c1"]["error"] == "denied"  # type: ignore[index]
    assert not (workspace / "ran.txt").exists()


def test_plugin_instructions_come_after_the_workspace_instructions(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    """plasmid: built-in callbacks and instructions run before plugin additions."""
    (workspace / "AGENTS.md").write_text("REPO-INSTRUCTIONS\n")
    fake.add(chat_text("ok"))
    rest = (
        '\n[plugins.g]\nbuiltin = "global_instruction"\n'
        'config = { instruction = "PLUGIN-APPENDED", position = "append" }\n'
    )
    with start(fake, tmp_path, "", rest) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_ask(sid, "hi").ok
    system = fake.requests[0].json["messages"][0]["content"]
    assert 0 < system.index("REPO-INSTRUCTIONS") < system.index("PLUGIN-APPENDED")


def test_a_tools_walk_warning_in_a_turn_comes_back_in_its_result(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    (workspace / ".gitignore").write_text("*.log\n[bad\n")
    fake.add(chat_calls(chat_tool_call("grep", json.dumps({"pattern": "hello"}))), chat_text("ok"))
    with start(fake, tmp_path) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        result = client.session_ask(sid, "find hello")
    assert result.ok
    [walked] = [w for w in result.warnings if w.source == "walk"]
    assert (walked.code, walked.path, walked.line) == (
        "walk.invalid_ignore_pattern",
        ".gitignore",
        2,
    )


def test_a_session_keeps_the_skill_catalog_of_its_first_turn(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    skills = tmp_path / "skills"
    (skills / "first").mkdir(parents=True)
    (skills / "first/SKILL.md").write_text("---\ndescription: First\n---\nOne.")
    listing = chat_calls(chat_tool_call("list_skills", "{}", "c2"))
    fake.add(chat_text("one"), listing, chat_text("two"))
    rest = f'\n[instructions]\nskill_roots = ["{skills}"]\n'
    with start(fake, tmp_path, "", rest) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_ask(sid, "hi").ok
        (skills / "later").mkdir()
        (skills / "later/SKILL.md").write_text("---\ndescription: Later\n---\nTwo.")
        assert client.session_ask(sid, "list them").ok
        listed = tool_answers(fake)["c2"]["skills"]  # type: ignore[index]
        assert [s["name"] for s in listed] == ["first"]  # the session's snapshot
        fake.add(chat_calls(chat_tool_call("list_skills", "{}", "c3")), chat_text("three"))
        other = client.session_new(workdir=str(workspace))
        assert client.session_ask(other, "list them").ok
        fresh = tool_answers(fake)["c3"]["skills"]  # type: ignore[index]
        assert [s["name"] for s in fresh] == ["first", "later"]  # a new session sees it


def test_the_prompt_reports_lsp_status_before_and_after_a_server_starts(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    rest = (
        f'\n[lsp.servers.ruff]\ncommand = ["{ruff}", "server"]\npatterns = ["*.py"]\n'
        'language_id = "python"\n'
    )
    write = json.dumps({"path": "a.py", "content": "import os\n"})
    fake.add(chat_calls(chat_tool_call("write", write, "c1")), chat_text("written"))
    with start(fake, tmp_path, "", rest) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_ask(sid, "write it").ok
    before, after = (r.json["messages"][0]["content"] for r in fake.requests[:2])
    assert before.endswith("LSP: none detected") and after.endswith("LSP: ruff")
    assert "diagnostics" in tool_answers(fake)["c1"]  # type: ignore[operator]


def test_no_language_servers_no_lsp_line(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    fake.add(chat_text("ok"))
    with start(fake, tmp_path) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_ask(sid, "hi").ok
    assert "LSP:" not in fake.requests[0].json["messages"][0]["content"]


def test_session_show_gives_a_snapshot_of_the_sessions_recent_warnings(
    fake: FakeProvider, tmp_path: Path, workspace: Path
) -> None:
    (workspace / ".gitignore").write_text("[bad\n")
    grep = chat_calls(chat_tool_call("grep", json.dumps({"pattern": "hello"})))
    fake.add(grep, chat_text("one"), grep, chat_text("two"))
    with start(fake, tmp_path) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        assert client.session_show(sid).warnings == []
        first = client.session_ask(sid, "find")
        second = client.session_ask(sid, "again")
        shown = client.session_show(sid).warnings
        assert shown == [*first.warnings, *second.warnings] and len(shown) == 2
        assert {w.code for w in shown} == {"walk.invalid_ignore_pattern"}
        other = client.session_new(workdir=str(workspace))
        assert client.session_show(other).warnings == []  # per session, never mixed


def test_recent_warnings_keep_the_last_of_each_session_within_both_bounds() -> None:
    from phloem.actors.sessions.recent import (
        MAX_KEPT_WARNINGS,
        MAX_WARNING_SESSIONS,
        RecentWarnings,
    )
    from phloem.protocols.warnings import RunWarning

    assert (MAX_KEPT_WARNINGS, MAX_WARNING_SESSIONS) == (256, 1_024)
    recent = RecentWarnings(per_session=3, sessions=2)
    made = [RunWarning(code="w", message=str(i)) for i in range(4)]
    recent.add("a", made[:3])  # exactly at the bound: all kept
    assert [w.message for w in recent.snapshot("a")] == ["0", "1", "2"]
    recent.add("a", made[3:])  # one over: the oldest goes
    assert [w.message for w in recent.snapshot("a")] == ["1", "2", "3"]
    snapshot = recent.snapshot("a")
    snapshot.clear()  # a copy
    assert len(recent.snapshot("a")) == 3
    recent.add("b", made[:1])
    recent.add("c", made[:1])  # a third session: the least recently warned is forgotten
    assert recent.snapshot("a") == [] and len(recent.snapshot("c")) == 1
    recent.forget("c")
    assert recent.snapshot("c") == []
