"""Live events: interruption epochs and audio purge, credit windows, slow-subscriber
detachment, the subscriber bound, every server message kind mapped to its event."""

from __future__ import annotations

import base64
import json

import pytest

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from tests.actors.live.conftest import TreeFactory, collect_until, next_kind, open_ready
from tests.helpers import raises_kind, wait_until
from tests.protocols.test_live import sdk_accepts


def _audio(n: int) -> dict[str, object]:
    pcm = bytes([n % 256]) * 480
    data = base64.b64encode(pcm).decode()
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": data}}
    return {"serverContent": {"modelTurn": {"parts": [part]}}}


def test_interrupted_purges_undelivered_audio_and_bumps_the_epoch(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, events = open_ready(client, window=phloem.CreditWindow(2, 1 << 20))
        for n in range(10):
            server.inject(_audio(n))
        topic = tree.streams._topics[f"live/{ref}"]
        wait_until(lambda: topic.stream.usage().pending_messages >= 7, what="audio pending")
        usage = topic.stream.usage()
        assert usage.in_flight_messages <= 2  # never more than the window outstanding
        server.inject({"serverContent": {"interrupted": True}})
        wait_until(lambda: client.live_status(ref)["generation_epoch"] == 1)
        seen = collect_until(events, "interrupted")
        audio = [e for e in seen if e.kind == "audio"]
        assert len(audio) < 10  # the rest was purged, never delivered
        assert seen[-1].payload["purged_audio"] == 10 - len(audio)
        assert all(e.generation_epoch == 0 for e in seen)
        assert isinstance(audio[0].payload["data"], bytes) and len(audio[0].payload["data"]) == 480
        server.inject({"serverContent": {"modelTurn": {"parts": [{"text": "after"}]}}})
        after = next_kind(events, "text")
        assert after.generation_epoch == 1 and after.turn_epoch == 0
        server.inject({"serverContent": {"turnComplete": True}})
        assert next_kind(events, "turn_complete").turn_epoch == 0
        server.inject({"serverContent": {"modelTurn": {"parts": [{"text": "next"}]}}})
        assert next_kind(events, "text").turn_epoch == 1
        status = client.live_status(ref)
        assert (status["turn_epoch"], status["generation_epoch"]) == (1, 1)


def test_slow_subscriber_is_detached_with_backpressure(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree(max_subscriber_messages=8) as tree, tree.client() as client:
        ref, slow = open_ready(client, window=phloem.CreditWindow(1, 1 << 20))
        fast = client.live_events(ref, phloem.CreditWindow(64, 1 << 20))
        for n in range(20):
            server.inject({"serverContent": {"modelTurn": {"parts": [{"text": f"t{n}"}]}}})
        texts = [next_kind(fast, "text").payload["text"] for _ in range(20)]
        assert texts == [f"t{n}" for n in range(20)]
        with pytest.raises(phloem.PhloemError) as info:
            while True:
                slow.recv(10)
        assert info.value.kind == "backpressure"
        # the session and the other subscriber are unaffected
        assert client.live_status(ref)["subscribers"] == 1
        client.live_send(ref, text="still here")
        assert next_kind(fast, "text").payload["text"] == "echo: still here"


def test_at_most_max_subscribers(live_tree: TreeFactory) -> None:
    with live_tree(max_subscribers=2) as tree, tree.client() as client:
        ref, _ = open_ready(client)
        second = client.live_events(ref)
        with pytest.raises(phloem.PhloemError) as info:
            client.live_events(ref).recv(5)
        assert info.value.kind == "backpressure"
        assert "max_subscribers" in info.value.message
        second.close()


def test_subscriber_sees_events_from_its_subscription_on(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, first = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(first, "turn_complete")
        late = client.live_events(ref)
        client.live_send(ref, text="two")
        seen = collect_until(late, "turn_complete")
        assert [e.payload.get("text") for e in seen if e.kind == "text"] == ["echo: two"]


def test_every_server_message_maps_to_its_event(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, events = open_ready(client)
        content = {
            "modelTurn": {
                "parts": [
                    {"text": "hmm", "thought": True},
                    {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
                ]
            },
            "inputTranscription": {"text": "heard"},
            "outputTranscription": {"text": "said", "finished": True},
            "generationComplete": True,
            "turnComplete": True,
            "turnCompleteReason": "NEED_MORE_INPUT",
            "waitingForInput": True,
            "groundingMetadata": {"webSearchQueries": ["q"]},
            "someFutureField": 1,
        }
        server.inject({"serverContent": content, "usageMetadata": {"totalTokenCount": 7}})
        server.inject({"toolCall": {"functionCalls": [{"id": "c1", "name": "f", "args": {}}]}})
        server.inject({"toolCallCancellation": {"ids": ["c1"]}})
        server.inject({"usageMetadata": {"promptTokenCount": 3}})
        seen = collect_until(events, "tool_call_cancellation")
        seen.append(next_kind(events, "usage"))
        kinds = [e.kind for e in seen]
        assert kinds == [
            "thought",
            "code",
            "code",
            "input_transcription",
            "output_transcription",
            "generation_complete",
            "turn_complete",
            "usage",
            "tool_call",
            "tool_call_cancellation",
            "usage",
        ]
        assert seen[6].payload == {
            "reason": "NEED_MORE_INPUT",
            "waiting_for_input": True,
            "grounding": {"webSearchQueries": ["q"]},
        }
        assert seen[7].payload == {"total_token_count": 7}
        call = seen[8].payload["calls"][0]
        assert call == {"id": "c1", "name": "f", "args": {}, "managed": False}
        # the client answers an unmanaged call itself
        client.live_send(ref, tool_responses=[{"id": "c1", "name": "f", "response": {"ok": 1}}])
        wait_until(lambda: any("toolResponse" in f for f in server.connection().frames))
        response = next(f for f in server.connection().frames if "toolResponse" in f)
        assert response["toolResponse"] == {
            "functionResponses": [{"id": "c1", "name": "f", "response": {"ok": 1}}]
        }


def test_input_bounds_and_activity_rules(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, _ = open_ready(client)
        assert (
            raises_kind(client.live_send, ref, text="x" * (64 * 1024 + 1)) == "invalid_live_input"
        )
        assert raises_kind(client.live_send, ref, activity="start") == "invalid_live_input"
        assert raises_kind(client.live_send, ref, video=b"x", video_mime="image/gif") == (
            "invalid_live_input"
        )
        assert raises_kind(client.live_send, ref) == "invalid_live_input"
        client.live_send(ref, text="x" * (64 * 1024))
        client.live_send(ref, audio=b"\0\0" * 1600, audio_stream_end=True)
        client.live_send(ref, video=b"\xff\xd8jpeg")
        manual, _ = open_ready(
            client, {"response_modalities": ["TEXT"], "automatic_activity_detection": False}
        )
        setup = server.connection().setup
        assert setup["realtimeInputConfig"] == {"automaticActivityDetection": {"disabled": True}}
        client.live_send(manual, activity="start")
        client.live_send(manual, audio=b"\0\0" * 160, activity="end")
        assert raises_kind(client.live_send, manual, audio_stream_end=True) == "invalid_live_input"
        wait_until(lambda: len(server.connection().frames) >= 4)
        sent = [next(iter(f["realtimeInput"])) for f in server.connection().frames[1:4]]
        assert sent == ["activityStart", "audio", "activityEnd"]
        # every frame phloem really sent passes the SDK's own types
        for conn in server.connections:
            for frame in conn.frames:
                sdk_accepts(json.dumps(frame).encode())
