"""`/run_live` as a browser voice socket (phloem's additions to ADK's live WebSocket), on
the fake Live server through a real daemon and a real `phloem api` process: binary PCM in
and out, credit/ack delivery with exact acknowledgement, voice-activity admission and
events, interruption dropping queued model audio, one socket per session (its lease),
and fail-closed teardown of the Live session when the socket is cut."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from phloem.actors.live.fake_server import FakeLiveServer
from phloem.client import Client
from phloem.web.api.live import MAX_VOICE_FRAME_BYTES
from phloem.web.api.liveflow import MAX_CREDIT, MAX_QUEUED_MESSAGES
from tests.api.apiproc import APP, ApiProc, api_config, running_api
from tests.helpers import running_daemon
from tests.models.fake_provider import FakeProvider

pytestmark = pytest.mark.timeout(180)
KEY_ENV = "PHLOEM_TEST_LIVE_KEY"
RECV_TIMEOUT_S = 30.0
POLL_DEADLINE_S = 30.0


class Rig:
    def __init__(self, api: ApiProc, session_id: str, live: FakeLiveServer, sock: Path) -> None:
        self.api, self.session_id, self.live, self.sock = api, session_id, live, sock

    def url(self, query: str = "", session_id: str | None = None) -> str:
        base = self.api.url.replace("http://", "ws://")
        sid = session_id or self.session_id
        return f"{base}/run_live?app_name={APP}&user_id=user&session_id={sid}&{query}"

    def stats(self) -> dict[str, int]:
        answer: dict[str, int] = httpx.get(f"{self.api.url}/phloem/stats", timeout=30).json()
        return answer


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    monkeypatch.setenv(KEY_ENV, "AIzaSyLIVE-test-key-0123456789abcdefghijk")
    ws = tmp_path / "ws"
    ws.mkdir()
    with FakeLiveServer() as live, FakeProvider() as fake:
        config = api_config(fake.base_url, tmp_path / "store", ws) + (
            f'\n[live]\nbase_url = "{live.url}"\napi_key_env = "{KEY_ENV}"\n'
            "first_subscriber_wait_s = 5.0\n"
        )
        with (
            running_daemon(config) as daemon,
            running_api(daemon.socket, "--listen", "127.0.0.1:0") as proc,
        ):
            made = httpx.post(f"{proc.url}/apps/{APP}/users/user/sessions", json={}, timeout=30)
            yield Rig(proc, made.json()["id"], live, daemon.socket)


def poll(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + POLL_DEADLINE_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"not within {POLL_DEADLINE_S} s: {what}")


def sent_frames(rig: Rig, key: str) -> list[dict[str, Any]]:
    if not rig.live.connections:
        return []
    return [
        f["realtimeInput"]
        for f in rig.live.connection().frames
        if key in f.get("realtimeInput", {})
    ]


def sent_on(rig: Rig, key: str) -> int:
    """1 + the index of the first connection that sent a `key` realtime input (0: none)."""
    for index, conn in enumerate(list(rig.live.connections)):
        if any(key in f.get("realtimeInput", {}) for f in conn.frames):
            return index + 1
    return 0


def model_audio(data: bytes) -> dict[str, Any]:
    blob = {"mimeType": "audio/pcm;rate=24000", "data": base64.b64encode(data).decode()}
    return {"serverContent": {"modelTurn": {"parts": [{"inlineData": blob}]}}}


async def ready(rig: Rig, ws: ClientConnection) -> None:
    """Wait until the Live session is connected (its setup answered)."""
    del ws
    await asyncio.to_thread(
        poll, lambda: rig.live.connections and rig.live.connection().setup, "setup"
    )


async def closed_with(ws: ClientConnection) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code, closed.value.rcvd.reason


def test_binary_voice_both_ways_under_exact_credit(rig: Rig) -> None:
    async def run() -> None:
        async with connect(rig.url("modalities=AUDIO&audio=binary&credit=2")) as ws:
            pcm = bytes(range(256)) * 8  # 2,048 B of 16-bit PCM
            await ws.send(pcm)
            got = await asyncio.to_thread(poll, lambda: sent_frames(rig, "audio"), "audio in")
            assert base64.b64decode(got[0]["audio"]["data"]) == pcm
            assert got[0]["audio"]["mimeType"].startswith("audio/pcm")
            for n in range(3):
                rig.live.inject(model_audio(bytes([n]) * 480))
            first, second = [await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S) for _ in "12"]
            assert (first, second) == (bytes([0]) * 480, bytes([1]) * 480)  # raw, no base64
            with pytest.raises(TimeoutError):  # credit spent: the third waits
                await asyncio.wait_for(ws.recv(), 1.0)
            await ws.send(json.dumps({"ack": 1}))
            assert await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S) == bytes([2]) * 480
            await ws.send(json.dumps({"ack": 3}))  # holds 2 unacknowledged: 3 is one too many
            code, reason = await closed_with(ws)
            assert code == 1007 and "ack 3" in reason

    asyncio.run(run())


def test_voice_frames_and_credit_at_their_limits(rig: Rig) -> None:
    async def run() -> None:
        async with connect(rig.url(f"modalities=AUDIO&credit={MAX_CREDIT}")) as ws:
            await ws.send(b"\0" * MAX_VOICE_FRAME_BYTES)  # exactly at the limit: admitted
            got = await asyncio.to_thread(poll, lambda: sent_frames(rig, "audio"), "audio in")
            assert len(base64.b64decode(got[0]["audio"]["data"])) == MAX_VOICE_FRAME_BYTES
            await ws.send(b"\0" * (MAX_VOICE_FRAME_BYTES + 2))  # one frame over
            code, reason = await closed_with(ws)
            assert code == 1007 and str(MAX_VOICE_FRAME_BYTES) in reason
        async with connect(rig.url("modalities=AUDIO")) as ws:
            await ws.send(b"\0\0\0")  # not 16-bit samples
            assert (await closed_with(ws))[0] == 1007
        over = httpx.get(
            rig.url(f"credit={MAX_CREDIT + 1}").replace("ws://", "http://"), timeout=30
        )
        assert over.status_code == 400 and over.json()["kind"] == "invalid_argument"

    asyncio.run(run())


def test_manual_activity_admits_audio_only_inside_an_activity(rig: Rig) -> None:
    async def run() -> None:
        async with connect(rig.url("modalities=AUDIO&activity=manual")) as ws:
            await ws.send(b"\1\0" * 100)  # before activityStart: refused
            code, reason = await closed_with(ws)
            assert code == 1007 and "activityStart" in reason
        async with connect(rig.url("modalities=AUDIO&activity=manual")) as ws:
            await ws.send(json.dumps({"activityStart": {}}))
            await ws.send(b"\1\0" * 100)
            await ws.send(json.dumps({"activityEnd": {}}))
            # the refused socket's Live session may reach the fake server later: find this
            # socket's connection by what it sent
            index = await asyncio.to_thread(poll, lambda: sent_on(rig, "activityEnd"), "end")
            conn = rig.live.connection(index - 1)
            order = [k for f in conn.frames for k in f.get("realtimeInput", {})]
            assert order == ["activityStart", "audio", "activityEnd"]
            detection = (conn.setup or {})["realtimeInputConfig"]["automaticActivityDetection"]
            assert detection["disabled"] is True
            activity = {"voiceActivityType": "ACTIVITY_START", "audioOffset": "1.250s"}
            rig.live.inject({"voiceActivity": activity}, index - 1)
            event = json.loads(await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S))
            assert event["customMetadata"]["phloem"]["voiceActivity"] == {
                "signal": "start",
                "audioOffsetMs": 1250,
            }
        async with connect(rig.url("modalities=AUDIO")) as ws:  # automatic: the server decides
            await ws.send(json.dumps({"activityStart": {}}))
            code, reason = await closed_with(ws)
            assert code == 1007 and "activity=manual" in reason

    asyncio.run(run())


def test_an_interruption_drops_the_queued_audio_of_its_turn(rig: Rig) -> None:
    async def run() -> None:
        async with connect(rig.url("modalities=AUDIO&audio=binary&credit=1")) as ws:
            await ready(rig, ws)
            before = rig.stats()["live_interruptions"]
            for n in range(3):
                rig.live.inject(model_audio(bytes([n]) * 480))
            # the first chunk is played (the one credit) before the interruption is sent:
            # an interruption that overtook it would rightly drop it too
            assert await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S) == bytes([0]) * 480
            rig.live.inject({"serverContent": {"interrupted": True}})
            await asyncio.to_thread(
                poll, lambda: rig.stats()["live_interruptions"] > before, "the interruption"
            )
            await ws.send(json.dumps({"ack": 1}))
            event = json.loads(await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S))
            assert event.get("interrupted") is True  # audio 1 and 2 never reach the player
            rig.live.inject(model_audio(b"\7" * 480))  # the next generation plays
            await ws.send(json.dumps({"ack": 1}))
            assert await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S) == b"\7" * 480

    asyncio.run(run())


def test_a_client_that_does_not_acknowledge_is_torn_down(rig: Rig) -> None:
    async def run() -> None:
        async with connect(rig.url("modalities=AUDIO&audio=binary&credit=1")) as ws:
            await ready(rig, ws)
            for _ in range(MAX_QUEUED_MESSAGES + 2):  # one in flight, the queue, one more
                rig.live.inject(model_audio(b"\0" * 64))
            code, reason = await closed_with(ws)
            assert code == 1011 and "keep up" in reason
        await asyncio.to_thread(
            poll,
            lambda: all(s["state"] == "closed" for s in live_sessions(rig)),
            "the Live session of a dropped client closed",
        )
        assert rig.stats()["clients_dropped"] == 1

    asyncio.run(run())


def test_a_provider_reconnect_keeps_the_socket_and_is_reported(rig: Rig) -> None:
    async def run() -> None:
        async with connect(rig.url("modalities=TEXT")) as ws:
            await say(ws, "one")  # its turn brings a resumption handle
            rig.live.go_away("5s")
            seen = [await next_json(ws) for _ in "12"]
            assert [e["customMetadata"]["phloem"]["liveEvent"] for e in seen] == [
                "go_away",
                "reconnecting",
            ]
            resumed = await asyncio.to_thread(
                poll,
                lambda: len(rig.live.connections) > 1 and rig.live.connection(1).setup,
                "the resumed connection's setup",
            )
            assert resumed["sessionResumption"] == {"handle": "handle-0-1"}
            assert await say(ws, "two") == "echo: two"  # the same socket, the resumed session

    asyncio.run(run())


async def next_json(ws: ClientConnection) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S))
    return event


async def say(ws: ClientConnection, text: str) -> str:
    """One text turn; the text of its answer."""
    await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": text}]}}))
    answer = ""
    while not (event := await next_json(ws)).get("turnComplete"):
        for part in (event.get("content") or {}).get("parts", []):
            answer += part.get("text", "") if event.get("partial") else ""
    return answer


def live_sessions(rig: Rig) -> list[dict[str, Any]]:
    with Client.connect(rig.sock) as client:
        return client.live_list()


def test_one_socket_per_session_and_a_cut_socket_closes_its_live_session(rig: Rig) -> None:
    async def run() -> None:
        ws = await connect(rig.url("modalities=TEXT"))
        await ready(rig, ws)
        second = httpx.get(rig.url("modalities=TEXT").replace("ws://", "http://"), timeout=30)
        assert second.status_code == 503 and second.json()["kind"] == "backpressure"
        assert [s["state"] for s in live_sessions(rig)] == ["active"]
        ws.transport.abort()  # no close frame: the browser tab vanished
        await asyncio.to_thread(
            poll,
            lambda: all(s["state"] == "closed" for s in live_sessions(rig)),
            "the Live session closed after its socket was cut",
        )
        async with connect(rig.url("modalities=TEXT")) as again:  # the lease is free again
            await again.send(json.dumps({"content": {"role": "user", "parts": [{"text": "hi"}]}}))
            event = json.loads(await asyncio.wait_for(again.recv(), RECV_TIMEOUT_S))
            assert event["content"]["parts"][0]["text"] == "echo: hi"

    asyncio.run(run())
