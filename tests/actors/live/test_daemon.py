"""Live sessions through a real daemon: owner death closes sessions cleanly, the session
limit, owner-bound refs, the async client, the CLI, and secrets kept out of everything
observable (events, status, lists, CLI output, daemon logs)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from tests.actors.live.conftest import KEY_ENV, TEST_KEY, collect_until, next_kind, open_ready
from tests.helpers import DaemonProc, raises_kind, run_cli, running_daemon, wait_until


@pytest.fixture
def daemon(server: FakeLiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[DaemonProc]:
    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    config = f"""
[live]
base_url = "{server.url}"
api_key_env = "{KEY_ENV}"
session_limit = 3
first_subscriber_wait_s = 5.0
"""
    with running_daemon(config) as proc:
        yield proc


def test_owner_death_closes_its_sessions_cleanly(
    server: FakeLiveServer, daemon: DaemonProc
) -> None:
    with phloem.Client.connect(daemon.socket) as other:
        owner = phloem.Client.connect(daemon.socket)
        ref, events = open_ready(owner)
        owner.live_send(ref, text="hello")
        next_kind(events, "turn_complete")
        # another client cannot use, watch or close it
        assert raises_kind(other.live_send, ref, text="x") == "not_live_owner"
        assert raises_kind(other.live_close, ref) == "not_live_owner"
        assert raises_kind(other.live_events, ref) == "not_live_owner"
        assert [s["state"] for s in other.live_list()] == ["active"]
        assert "live-session-1" in repr(other.tree())  # its own node in `phloem tree`
        owner.close()
        conn = server.connection(0)
        assert conn.closed.wait(10)
        assert conn.close_code == 1000
        wait_until(lambda: other.live_list() == [], what="session ended")


def test_session_limit(server: FakeLiveServer, daemon: DaemonProc) -> None:
    with phloem.Client.connect(daemon.socket) as client:
        refs = [client.live_open({"response_modalities": ["TEXT"]}) for _ in range(3)]
        assert raises_kind(client.live_open) == "live_session_limit"
        client.live_close(refs[0])
        wait_until(lambda: len(client.live_list()) == 2)
        client.live_open()  # a slot is free again
        assert raises_kind(client.live_open) == "live_session_limit"


def test_async_client(server: FakeLiveServer, daemon: DaemonProc) -> None:
    async def main() -> list[str]:
        async with await phloem.AsyncClient.connect(daemon.socket) as client:
            ref = await client.live_open({"response_modalities": ["TEXT"]})
            stream = await client.live_events(ref, phloem.CreditWindow(64, 1 << 20))
            kinds = []
            async for event in stream:
                kinds.append(event.kind)
                if event.kind == "ready":
                    await client.live_send(ref, text="async")
                    assert (await client.live_status(ref))["state"] == "active"
                elif event.kind == "turn_complete":
                    assert await client.live_close(ref) == "client_closed"
            return kinds

    kinds = asyncio.run(main())
    assert kinds == ["ready", "text", "turn_complete", "closed"]


def test_cli_chat_and_list(server: FakeLiveServer, daemon: DaemonProc) -> None:
    sock = str(daemon.socket)
    result = run_cli("live", "chat", "--socket", sock, "--text", "one", "--text", "two")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["echo: one", "echo: two"]
    result = run_cli("live", "chat", "--socket", sock, "--text", "hi", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"turn": 1, "text": "echo: hi"}
    assert run_cli("live", "chat", "--socket", sock).returncode == 2
    listed = run_cli("live", "list", "--socket", sock)
    assert listed.returncode == 0 and "no Live sessions" in listed.stdout
    with phloem.Client.connect(daemon.socket) as client:
        open_ready(client)
        listed = run_cli("live", "list", "--socket", sock, "--json")
        assert [s["state"] for s in json.loads(listed.stdout)] == ["active"]
        table = run_cli("live", "list", "--socket", sock).stdout
        assert "active" in table and "gemini-3.1-flash-live-preview" in table


def test_secrets_are_absent_from_everything_observable(
    server: FakeLiveServer, daemon: DaemonProc
) -> None:
    observed: list[str] = []
    with phloem.Client.connect(daemon.socket) as client:
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        observed += [repr(e) for e in collect_until(events, "turn_complete")]
        wait_until(lambda: client.live_status(ref)["resumable"])
        server.go_away("1s")
        observed += [repr(e) for e in collect_until(events, "ready")]
        observed.append(repr(client.live_status(ref)))
        observed.append(repr(client.live_list()))
        observed.append(repr(client.tree()))
        client.live_close(ref)
        observed += [repr(e) for e in events]
    observed.append(run_cli("live", "list", "--socket", str(daemon.socket), "--json").stdout)
    observed.append(run_cli("status", "--socket", str(daemon.socket), "--json").stdout)
    # the key went to the server in its header only, never in the URL
    for conn in server.connections:
        assert conn.headers["x-goog-api-key"] == TEST_KEY
        assert TEST_KEY not in conn.path and "key=" not in conn.path
    assert server.connection(1).setup["sessionResumption"]["handle"] == "handle-0-1"
    observed.append("".join(daemon.lines))
    text = "\n".join(observed)
    assert TEST_KEY not in text
    assert "handle-0-" not in text


def test_the_key_is_kept_out_of_reprs() -> None:
    from phloem.actors.live.transport import Dial

    assert TEST_KEY not in repr(Dial("ws://x", TEST_KEY, b"{}", 1.0, 1.0))
