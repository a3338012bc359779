"""`/run_live`: ADK's live WebSocket bridged to a phloem Live session on the fake Live
server. ADK's own `LiveRequest` goes in, ADK `Event`s come out (the echo of the turn, as
partial text, then `turnComplete`); `close` ends it cleanly, a message that is not a
`LiveRequest` closes the socket with 1007 and one line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from phloem.actors.live.fake_server import FakeLiveServer
from tests.api.apiproc import APP, ApiProc, api_config, running_api
from tests.helpers import running_daemon
from tests.models.fake_provider import FakeProvider

from google.adk.agents.live_request_queue import LiveRequest  # isort: skip
from google.adk.events.event import Event  # isort: skip
from google.genai import types  # isort: skip

pytestmark = pytest.mark.timeout(120)
KEY_ENV = "PHLOEM_TEST_LIVE_KEY"
RECV_TIMEOUT_S = 30.0


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ApiProc, str]]:
    monkeypatch.setenv(KEY_ENV, "AIzaSyLIVE-test-key-0123456789abcdefghijk")
    ws = tmp_path / "ws"
    ws.mkdir()
    with FakeLiveServer() as live, FakeProvider() as fake:
        config = (
            api_config(fake.base_url, tmp_path / "store", ws)
            + f"""
[live]
base_url = "{live.url}"
api_key_env = "{KEY_ENV}"
first_subscriber_wait_s = 5.0
"""
        )
        with (
            running_daemon(config) as daemon,
            running_api(daemon.socket, "--listen", "127.0.0.1:0") as proc,
        ):
            made = httpx.post(f"{proc.url}/apps/{APP}/users/user/sessions", json={}, timeout=30)
            yield proc, made.json()["id"]


def _url(api: ApiProc, session_id: str) -> str:
    ws = api.url.replace("http://", "ws://")
    return f"{ws}/run_live?app_name={APP}&user_id=user&session_id={session_id}&modalities=TEXT"


def test_a_live_turn_through_adk_live_requests(api: tuple[ApiProc, str]) -> None:
    asyncio.run(_turn(*api))


async def _turn(api: ApiProc, session_id: str) -> None:
    hello = LiveRequest(content=types.Content(role="user", parts=[types.Part(text="hello")]))
    async with connect(_url(api, session_id)) as ws:
        await ws.send(hello.model_dump_json(by_alias=True, exclude_none=True))
        events: list[Event] = []
        while not (events and events[-1].turn_complete):
            raw = await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
            events.append(Event.model_validate(json.loads(raw)))
        text = "".join(
            p.text or "" for e in events if e.content and e.partial for p in e.content.parts
        )
        assert text == "echo: hello" and all(e.author == APP for e in events)
        await ws.send(LiveRequest(close=True).model_dump_json(by_alias=True, exclude_none=True))
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


def test_a_bad_live_request_closes_with_1007(api: tuple[ApiProc, str]) -> None:
    async def bad() -> None:
        async with connect(_url(*api)) as ws:
            await ws.send(json.dumps({"nothing": True}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
            assert "\n" not in closed.value.rcvd.reason and "content" in closed.value.rcvd.reason

    asyncio.run(bad())


def test_run_live_for_an_unknown_session_or_a_foreign_origin_is_refused(
    api: tuple[ApiProc, str],
) -> None:
    proc, session_id = api
    query = f"app_name={APP}&user_id=user&session_id=nope&modalities=TEXT"
    unknown = httpx.get(f"{proc.url}/run_live?{query}", timeout=30)
    assert unknown.status_code == 404 and unknown.json()["kind"] == "unknown_session"
    foreign = httpx.get(
        _url(proc, session_id).replace("ws://", "http://"),
        headers={"Origin": "http://evil.example"},
        timeout=30,
    )
    assert foreign.status_code == 403 and foreign.json()["kind"] == "permission_denied"
