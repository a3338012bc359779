"""Tool policy, confirmation and instructions over a real daemon, with a local fake
OpenAI-compatible provider standing in for the model: approve, deny, timeout, owner
gone, another client's answer, per-agent and per-run allow/deny, and the instructions in
the model request in their documented order."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phloem import Client
from phloem.actors.agents.protocol import AgentStreamItem
from phloem.protocols.credit import CreditWindow
from phloem.protocols.runs import ConfirmRequest, RunEnd
from tests.helpers import DaemonProc, raises_kind, run_cli, running_daemon, short_tmpdir
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

pytestmark = pytest.mark.timeout(90)


class Setup:
    def __init__(self, daemon: DaemonProc, fake: FakeProvider, ws: Path, home: Path) -> None:
        self.daemon = daemon
        self.fake = fake
        self.ws = ws
        self.home = home

    def client(self) -> Client:
        return Client.connect(self.daemon.socket)

    def script(self, name: str, args: dict[str, Any], final: str = "done") -> None:
        self.fake.add(chat_calls(chat_tool_call(name, json.dumps(args))), chat_text(final))

    def bodies(self) -> list[Any]:
        return [r.json for r in self.fake.requests]


CONFIG = """
[services]
disabled = ["echo"]

[providers.fake]
protocol = "openai-chat"
model = "fake-model"
base_url = "{url}/v1"
chat_token_limit = "max_tokens"

[agents.llm.coder]
provider = "fake"
instruction = "You are the coder."
tools = ["read", "write", "bash", "ls"]
workdir = "{ws}"
instructions = true
confirmation = true
confirmation_timeout_s = 30

[agents.llm.hasty]
provider = "fake"
tools = ["write"]
workdir = "{ws}"
confirmation = true
confirmation_timeout_s = 0.3

[agents.llm.limited]
provider = "fake"
tools = ["read", "write", "bash", "ls"]
workdir = "{ws}"
tools_allow = ["read", "write", "ls"]
tools_deny = ["write"]

[agents.planners.team]
planner = "sequential"
sub_agents = ["limited", "hasty"]
"""


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    base = short_tmpdir()
    home, ws = base / "home", base / "ws"
    (home / ".claude").mkdir(parents=True)
    (ws / "src").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("USER RULES")
    (ws / "AGENTS.md").write_text("ROOT RULES")
    (ws / "src" / "AGENTS.md").write_text("SRC RULES")
    (ws / "src" / "main.py").write_text("print(1)\n")
    with pytest.MonkeyPatch.context() as mp, FakeProvider() as fake:
        mp.setenv("HOME", str(home))  # the daemon inherits it
        with running_daemon(CONFIG.format(url=fake.base_url, ws=ws)) as daemon:
            yield Setup(daemon, fake, ws, home)


@pytest.fixture(autouse=True)
def _fresh(setup: Setup) -> Iterator[None]:
    setup.fake.requests.clear()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt", "e.txt"):
        (setup.ws / name).unlink(missing_ok=True)
    yield
    assert setup.fake.unused == 0, "a scripted reply was not used"


def tool_answers(run: Any) -> list[dict[str, Any]]:
    return [
        part.function_response.response
        for event in run.events
        for part in (event.content.parts if event.content else ())
        if part.function_response is not None
    ]


def test_an_approved_call_runs_and_the_confirm_item_shows_it(setup: Setup) -> None:
    token = "sk-" + "a1" * 16
    setup.script("write", {"path": "a.txt", "content": f"hello {token}"})
    seen: list[ConfirmRequest] = []
    with setup.client() as client:
        run = client.run_agent(
            "coder", input="write a.txt", on_confirm=lambda r: seen.append(r) or True
        )
    assert run.outcome.status == "done"
    (request,) = seen
    assert request.kind == "confirm" and request.tool == "write" and request.agent == "coder"
    assert request.call_id.startswith("call_") and request.timeout_s == 30
    # what is shown is what runs: the secret is marked, not rewritten
    assert request.args == {"path": "a.txt", "content": f"hello {token}"}
    assert request.secrets == ["/content"]
    assert (setup.ws / "a.txt").read_text() == f"hello {token}"


# Copies the shell's own argv (`bash -c COMMAND`) first, then runs a `$(...)` that a
# redaction of "password=..." used to hide from the owner ("password=[redacted] x)").
HIDDEN = "cp /proc/$$/cmdline seen.bin; export password=$(touch hidden.txt)"


def _ran(setup: Setup) -> bytes:
    """The command the bash tool ran, as its shell got it (argv[2] of `bash -c`)."""
    return (setup.ws / "seen.bin").read_bytes().split(b"\0")[2]


def test_the_approved_command_is_byte_for_byte_the_command_bash_runs(setup: Setup) -> None:
    for name in ("seen.bin", "hidden.txt"):
        (setup.ws / name).unlink(missing_ok=True)
    setup.script("bash", {"command": HIDDEN})
    seen: list[ConfirmRequest] = []
    with setup.client() as client:
        run = client.run_agent("coder", input="sh", on_confirm=lambda r: seen.append(r) or True)
    assert run.outcome.status == "done"
    (request,) = seen
    assert request.tool == "bash" and request.args == {"command": HIDDEN}
    assert request.secrets == ["/command"]  # marked for the renderer, shown as it is
    assert _ran(setup) == request.args["command"].encode() == HIDDEN.encode()
    assert (setup.ws / "hidden.txt").exists()  # the `$(...)` ran, and the owner saw it


def test_the_cli_prompt_shows_the_exact_command_that_runs(setup: Setup) -> None:
    for name in ("seen.bin", "hidden.txt"):
        (setup.ws / name).unlink(missing_ok=True)
    socket = str(setup.daemon.socket)
    setup.script("bash", {"command": HIDDEN})
    done = run_cli("agent", "run", "coder", "--input", "sh", "--yes", "--socket", socket)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("run bash ")]
    shown, end = json.JSONDecoder().raw_decode(line, len("run bash "))
    assert line[end:] == " (secret-looking: /command)? yes (--yes)"
    assert _ran(setup) == shown["command"].encode() == HIDDEN.encode()
    assert (setup.ws / "hidden.txt").exists()


def test_a_refused_call_answers_not_confirmed_and_does_not_run(setup: Setup) -> None:
    setup.script("write", {"path": "b.txt", "content": "no"})
    with setup.client() as client:
        run = client.run_agent("coder", input="write b.txt", on_confirm=lambda r: False)
    (answer,) = tool_answers(run)
    assert answer["error"] == "not_confirmed" and answer["reason"] == "denied"
    assert not (setup.ws / "b.txt").exists()
    tool_message = setup.bodies()[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "not_confirmed" in tool_message["content"]


def test_read_only_tools_run_without_asking(setup: Setup) -> None:
    setup.script("ls", {})
    with setup.client() as client:
        run = client.run_agent("coder", input="list", on_confirm=lambda r: pytest.fail("asked"))
    assert "entries" in tool_answers(run)[0]


def test_no_answer_within_the_timeout_is_not_confirmed(setup: Setup) -> None:
    setup.script("write", {"path": "c.txt", "content": "late"})
    with setup.client() as client:
        run = client.run_agent("hasty", input="write c.txt")  # nobody answers
    (answer,) = tool_answers(run)
    assert answer["error"] == "not_confirmed" and answer["reason"] == "timeout"
    assert not (setup.ws / "c.txt").exists()


def follow_to_confirm(client: Client, stream: str) -> tuple[Any, ConfirmRequest]:
    source = client.subscribe(stream, CreditWindow(64, 1 << 22), event_type=AgentStreamItem)
    while True:
        item = source.recv(30)
        if isinstance(item, ConfirmRequest):
            return source, item


def test_only_the_owner_may_answer_and_a_late_answer_is_unknown(setup: Setup) -> None:
    setup.script("write", {"path": "d.txt", "content": "owner said yes"})
    with setup.client() as owner, setup.client() as other:
        started = owner.start_agent_run("coder", input="write d.txt")
        source, request = follow_to_confirm(owner, started.stream)
        assert (
            raises_kind(other.confirm_agent_run, started.ref, request.call_id, True) == "not_owner"
        )
        assert (
            raises_kind(owner.confirm_agent_run, started.ref, "call_nope", True) == "unknown_call"
        )
        owner.confirm_agent_run(started.ref, request.call_id, True)
        assert raises_kind(owner.confirm_agent_run, started.ref, request.call_id, True) in (
            "unknown_call",
            "invalid_ref",  # the run may already have ended
        )
        while not isinstance(source.recv(30), RunEnd):
            pass
        source.close()
    assert (setup.ws / "d.txt").read_text() == "owner said yes"


def test_an_owner_that_goes_away_confirms_nothing_even_after_a_reconnect(setup: Setup) -> None:
    setup.fake.add(
        chat_calls(chat_tool_call("write", json.dumps({"path": "e.txt", "content": "x"})))
    )
    owner = setup.client()
    started = owner.start_agent_run("coder", input="write e.txt")
    _, request = follow_to_confirm(owner, started.stream)
    owner.close()  # the owner vanishes while the call waits
    event = setup.daemon.wait_event("tool_not_confirmed")
    while event["reason"] != "owner_gone":  # earlier tests' refusals are logged too
        assert event["reason"] in ("denied", "timeout")
        event = setup.daemon.wait_event("tool_not_confirmed")
    assert event["tool"] == "write"
    with setup.client() as again:  # a new connection cannot approve it
        assert raises_kind(again.confirm_agent_run, started.ref, request.call_id, True) in (
            "not_owner",
            "invalid_ref",
        )
    assert not (setup.ws / "e.txt").exists()
    assert len(setup.fake.requests) == 1  # the run stopped; the model was not asked again


def test_agent_config_allow_and_deny_filter_and_refuse(setup: Setup) -> None:
    setup.script("write", {"path": "a.txt", "content": "x"})
    with setup.client() as client:
        run = client.run_agent("limited", input="write")
    (answer,) = tool_answers(run)
    assert answer["error"] == "denied"
    assert not (setup.ws / "a.txt").exists()
    offered = sorted(t["function"]["name"] for t in setup.bodies()[0]["tools"])
    assert offered == ["ls", "read"]  # allow ∩ not deny; bash is not in the allow list


def test_a_run_can_narrow_its_tools_but_never_widen_them(setup: Setup) -> None:
    setup.script("bash", {"command": "touch a.txt"})
    with setup.client() as client:
        run = client.run_agent(
            "limited", input="shell", tools_allow=["bash", "ls", "write"], tools_deny=["ls"]
        )
        assert tool_answers(run)[0]["error"] == "denied"
        assert raises_kind(client.run_agent, "limited", input="x", tools_allow=["no such!"]) == (
            "invalid_argument"
        )
    assert setup.bodies()[0].get("tools") is None  # nothing left to offer
    assert not (setup.ws / "a.txt").exists()


def test_the_model_request_holds_the_instructions_in_order(setup: Setup) -> None:
    setup.script("read", {"path": "src/main.py"})
    asked = threading.Event()
    with setup.client() as client:
        run = client.run_agent("coder", input="read main", on_confirm=lambda r: asked.set() or True)
    assert run.outcome.status == "done" and not asked.is_set()
    first, second = (body["messages"][0] for body in setup.bodies())
    assert first["role"] == "system" and second["role"] == "system"
    assert first["content"].startswith(
        "You are the coder.\n\nInstructions from ~/.claude/CLAUDE.md"
    )
    order = ["USER RULES", "ROOT RULES"]
    assert [first["content"].index(t) for t in order] == sorted(
        first["content"].index(t) for t in order
    )
    assert "SRC RULES" not in first["content"]
    # reading src/main.py activated src/AGENTS.md for the next model call, after the root's
    text = second["content"]
    assert text.index("USER RULES") < text.index("ROOT RULES") < text.index("SRC RULES")
    assert run.warnings == ()


def test_the_cli_approves_with_yes_and_refuses_without_a_terminal(setup: Setup) -> None:
    socket = str(setup.daemon.socket)
    setup.script("write", {"path": "a.txt", "content": "cli"})
    refused = run_cli("agent", "run", "coder", "--input", "write", "--socket", socket)
    assert "run write" in refused.stderr and "no (no terminal to ask" in refused.stderr
    assert not (setup.ws / "a.txt").exists()
    setup.script("write", {"path": "a.txt", "content": "cli"})
    approved = run_cli("agent", "run", "coder", "--input", "write", "--yes", "--socket", socket)
    assert approved.returncode == 0, approved.stderr
    assert (setup.ws / "a.txt").read_text() == "cli"
    setup.script("ls", {})
    denied = run_cli(
        "agent", "run", "coder", "--input", "ls", "--deny", "ls", "--json", "--socket", socket
    )
    assert '"error":"denied"' in denied.stdout


def test_the_async_client_answers_with_a_coroutine_and_narrows_tools(setup: Setup) -> None:
    import asyncio

    from phloem import AsyncClient

    setup.script("write", {"path": "b.txt", "content": "async"})
    setup.script("bash", {"command": "touch c.txt"})

    async def scenario() -> tuple[Any, Any]:
        async def answer(request: ConfirmRequest) -> bool:
            return request.tool == "write"

        async with await AsyncClient.connect(setup.daemon.socket) as client:
            approved = await client.run_agent("coder", input="write", on_confirm=answer)
            denied = await client.run_agent("coder", input="sh", tools_deny=["bash"])
            return approved, denied

    approved, denied = asyncio.run(scenario())
    assert approved.outcome.status == "done"
    assert (setup.ws / "b.txt").read_text() == "async"
    assert tool_answers(denied)[0]["error"] == "denied"
    assert not (setup.ws / "c.txt").exists()


def test_a_planners_sub_agents_keep_their_own_policy_and_confirmation(setup: Setup) -> None:
    setup.script("bash", {"command": "touch a.txt"})  # limited: bash is not in its allow list
    setup.script("write", {"path": "c.txt", "content": "x"})  # hasty: asks, nobody answers
    with setup.client() as client:
        run = client.run_agent("team", input="go")
    denied, unconfirmed = tool_answers(run)
    assert denied["error"] == "denied"
    assert unconfirmed["error"] == "not_confirmed" and unconfirmed["reason"] == "timeout"
    assert not (setup.ws / "a.txt").exists() and not (setup.ws / "c.txt").exists()
