"""The instructions feature inside harness sessions, over a real daemon with a local fake
provider: instructions in a turn's model request in the documented order (activation
kept across turns), `session_ask(tools_allow=, tools_deny=)`, `session_confirm`
(approve, deny, timeout, owner gone, reconnect), skills, prompt commands, warnings in
`AskResult.warnings`, and `phloem chat` answering confirmations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phloem import Client
from phloem.actors.sessions.protocol import SessionStreamItem
from phloem.protocols.credit import CreditWindow
from phloem.protocols.runs import ConfirmRequest
from tests.helpers import DaemonProc, raises_kind, run_cli, running_daemon, short_tmpdir
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

pytestmark = pytest.mark.timeout(90)

CONFIG = """
[services]
disabled = ["echo"]

[providers.fake]
protocol = "openai-chat"
model = "fake-model"
base_url = "{url}/v1"
chat_token_limit = "max_tokens"
max_retries = 0

[instructions]
skill_roots = ["{base}/skills"]
template_roots = ["{base}/prompts"]

[sessions]
dir = "{base}/store"
fsync = false

[agents.llm.coder]
harness = true
provider = "fake"
instruction = "You are the coder."
confirmation = true
confirmation_timeout_s = 30

[agents.llm.hasty]
harness = true
provider = "fake"
confirmation = true
confirmation_timeout_s = 0.3

[agents.llm.plain]
harness = true
provider = "fake"
instruction = "Plain."
tools_deny = ["bash"]
"""


class Setup:
    def __init__(self, daemon: DaemonProc, fake: FakeProvider, ws: Path) -> None:
        self.daemon = daemon
        self.fake = fake
        self.ws = ws

    def client(self) -> Client:
        return Client.connect(self.daemon.socket)

    def new(self, client: Client, agent: str = "coder") -> str:
        return client.session_new(agent=agent, workdir=str(self.ws))

    def script(self, name: str, args: dict[str, Any], final: str = "done") -> None:
        self.fake.add(chat_calls(chat_tool_call(name, json.dumps(args))), chat_text(final))

    def bodies(self) -> list[Any]:
        return [r.json for r in self.fake.requests]


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    base = short_tmpdir()
    home, ws = base / "home", base / "ws"
    files = {
        home / ".codex/AGENTS.md": "USER RULES",
        ws / "AGENTS.md": "ROOT RULES @~/.codex/AGENTS.md",
        ws / "CLAUDE.md": "ROOT RULES @~/.codex/AGENTS.md",  # same bytes: taken once
        ws / "lib/AGENTS.md": "LIB RULES",
        ws / "lib/util.py": "X = 1\n",
        base / "skills/release/SKILL.md": "---\ndescription: Cut a release\n---\nTag it.",
        base / "prompts/explain.md": "Explain {{1}} briefly.",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    with pytest.MonkeyPatch.context() as mp, FakeProvider() as fake:
        mp.setenv("HOME", str(home))
        with running_daemon(CONFIG.format(url=fake.base_url, base=base)) as daemon:
            yield Setup(daemon, fake, ws)


@pytest.fixture(autouse=True)
def _fresh(setup: Setup) -> Iterator[None]:
    setup.fake.requests.clear()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (setup.ws / name).unlink(missing_ok=True)
    yield
    assert setup.fake.unused == 0, "a scripted reply was not used"


def test_a_turn_sends_the_instructions_in_order_and_activation_lasts(setup: Setup) -> None:
    setup.script("read", {"path": "lib/util.py"})
    setup.fake.add(chat_text("second turn"))
    with setup.client() as client:
        sid = setup.new(client, "plain")
        first = client.session_ask(sid, "read util")
        second = client.session_ask(sid, "again")
    assert first.ok and second.ok
    systems = [body["messages"][0]["content"] for body in setup.bodies()]
    assert systems[0].startswith("Plain.\n\nInstructions from ~/.codex/AGENTS.md (user):")
    assert "LIB RULES" not in systems[0]
    for text in systems[1:]:  # after the read of lib/util.py, and in the next turn too
        assert text.index("USER RULES") < text.index("ROOT RULES") < text.index("LIB RULES")
    assert systems[0].count("ROOT RULES") == 1
    # the root file imports from the home: refused, and said so in the turn's warnings
    assert [(w.code, w.path, w.line) for w in first.warnings] == [
        ("instructions_import_outside", "AGENTS.md", 1)
    ]
    assert second.warnings == []


def test_session_ask_narrows_the_turns_tools(setup: Setup) -> None:
    setup.script("write", {"path": "a.txt", "content": "x"})
    with setup.client() as client:
        sid = setup.new(client, "plain")
        result = client.session_ask(
            sid, "write", tools_allow=["read", "write"], tools_deny=["write"]
        )
        assert result.tool_calls[0].response is not None
        assert result.tool_calls[0].response["error"] == "denied"
        assert raises_kind(client.session_ask, sid, "x", tools_deny=["not a name"]) == (
            "invalid_argument"
        )
    assert not (setup.ws / "a.txt").exists()
    offered = sorted(t["function"]["name"] for t in setup.bodies()[0]["tools"])
    assert offered == ["read"]  # bash was denied by the agent, write by the turn


def test_skills_are_offered_and_prompt_commands_expand(setup: Setup) -> None:
    setup.script("load_skill", {"name": "release"})
    with setup.client() as client:
        sid = setup.new(client, "plain")
        result = client.session_ask(sid, "/explain lib/util.py")
        assert raises_kind(client.session_ask, sid, "/nothing here") == "unknown_template"
    first = setup.bodies()[0]
    assert first["messages"][1] == {"role": "user", "content": "Explain lib/util.py briefly."}
    assert {"list_skills", "load_skill"} <= {t["function"]["name"] for t in first["tools"]}
    assert result.tool_calls[0].response is not None
    assert result.tool_calls[0].response["body"] == "Tag it."


def test_session_confirm_approves_and_refuses(setup: Setup) -> None:
    setup.script("write", {"path": "b.txt", "content": "yes"})
    setup.script("bash", {"command": "touch c.txt"})
    asked: list[ConfirmRequest] = []

    def answer(request: ConfirmRequest) -> bool:
        asked.append(request)
        return request.tool == "write"

    with setup.client() as client:
        sid = setup.new(client)
        approved = client.session_ask(sid, "write b", on_confirm=answer)
        refused = client.session_ask(sid, "touch c", on_confirm=answer)
    assert (setup.ws / "b.txt").read_text() == "yes" and approved.ok
    assert not (setup.ws / "c.txt").exists()
    assert refused.tool_calls[0].response is not None
    assert refused.tool_calls[0].response["reason"] == "denied"
    assert [(r.kind, r.tool) for r in asked] == [("confirm", "write"), ("confirm", "bash")]


def test_no_answer_in_time_is_not_confirmed(setup: Setup) -> None:
    setup.script("write", {"path": "d.txt", "content": "late"})
    with setup.client() as client:
        result = client.session_ask(setup.new(client, "hasty"), "write d")
    assert result.tool_calls[0].response is not None
    assert result.tool_calls[0].response["reason"] == "timeout"
    assert not (setup.ws / "d.txt").exists()


def test_an_owner_gone_confirms_nothing_even_after_a_reconnect(setup: Setup) -> None:
    setup.fake.add(
        chat_calls(chat_tool_call("write", json.dumps({"path": "a.txt", "content": "x"})))
    )
    owner = setup.client()
    sid = setup.new(owner)
    started = owner.session_start(sid, "write a")
    stream = owner.subscribe(
        started.stream, CreditWindow(64, 1 << 22), event_type=SessionStreamItem
    )
    request = None
    while request is None:
        item = stream.recv(30)
        request = item if isinstance(item, ConfirmRequest) else None
    with setup.client() as other:  # someone else may not answer
        assert raises_kind(other.session_confirm, sid, request.call_id, True) == "not_owner"
    owner.close()  # the owner vanishes while the call waits
    event = setup.daemon.wait_event("tool_not_confirmed")
    while event["reason"] != "owner_gone":
        event = setup.daemon.wait_event("tool_not_confirmed")
    with setup.client() as again:  # a reconnect cannot approve it: the run is over
        assert raises_kind(again.session_confirm, sid, request.call_id, True) in (
            "unknown_call",
            "not_owner",
        )
    assert not (setup.ws / "a.txt").exists()
    assert len(setup.fake.requests) == 1


def test_chat_asks_and_without_a_terminal_refuses_unless_yes(setup: Setup) -> None:
    socket = str(setup.daemon.socket)
    with setup.client() as client:
        sid = setup.new(client)
    setup.script("write", {"path": "a.txt", "content": "chat"})
    refused = run_cli("chat", "--session", sid, "write a", "--socket", socket)
    assert "run write" in refused.stderr and "no (no terminal to ask" in refused.stderr
    assert "< write error: not_confirmed" in refused.stdout
    assert not (setup.ws / "a.txt").exists()
    setup.script("write", {"path": "a.txt", "content": "chat"})
    approved = run_cli("chat", "--session", sid, "write a", "--yes", "--socket", socket)
    assert approved.returncode == 0, approved.stderr
    assert (setup.ws / "a.txt").read_text() == "chat"


def test_the_async_client_confirms_and_narrows_a_turn(setup: Setup) -> None:
    import asyncio

    from phloem import AsyncClient

    setup.script("write", {"path": "b.txt", "content": "async"})
    setup.script("edit", {"path": "b.txt", "old_text": "async", "new_text": "x"})

    async def scenario() -> tuple[Any, Any]:
        async def yes(request: ConfirmRequest) -> bool:
            return True

        async with await AsyncClient.connect(setup.daemon.socket) as client:
            sid = await client.session_new(agent="coder", workdir=str(setup.ws))
            approved = await client.session_ask(sid, "write", on_confirm=yes)
            denied = await client.session_ask(sid, "edit", tools_deny=["edit"], on_confirm=yes)
            return approved, denied

    approved, denied = asyncio.run(scenario())
    assert approved.ok and (setup.ws / "b.txt").read_text() == "async"
    assert denied.tool_calls[0].response is not None
    assert denied.tool_calls[0].response["error"] == "denied"


def test_an_async_follow_that_stops_early_cancels_its_turn(setup: Setup) -> None:
    """The async client too: a callback that raises cancels the run (plasmid: stopping
    iteration early cancels the run and releases its session)."""
    import asyncio
    import time

    from phloem import AsyncClient

    marker = setup.ws / "c.txt"
    command = {"command": f"sleep 5; echo late > {marker}"}
    setup.fake.add(chat_calls(chat_tool_call("bash", json.dumps(command))))

    class Stop(Exception):
        pass

    async def stop(event: Any) -> None:
        raise Stop

    async def scenario() -> bool:
        async with await AsyncClient.connect(setup.daemon.socket) as client:
            sid = await client.session_new(agent="coder", workdir=str(setup.ws))
            with pytest.raises(Stop):
                await client.session_run(sid, "run it", on_event=stop, on_confirm=lambda r: True)
            for _ in range(300):  # the session is released soon after the cancel
                if not (await client.session_show(sid)).summary.busy:
                    return True
                await asyncio.sleep(0.1)
            return False

    assert asyncio.run(scenario())
    time.sleep(6)  # past the command's own end: it was stopped
    assert not marker.exists()
