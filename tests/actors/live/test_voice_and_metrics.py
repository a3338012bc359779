"""Live voice-activity signals and transcription metadata become events in phloem's own
vocabulary, and Live sessions, media and tool calls are counted (seed 002 A, E)."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.settings import LiveConfig
from phloem.actors.telemetry.settings import TelemetryConfig
from phloem.config import Config
from phloem.protocols import live as wire
from tests.actors.live.conftest import KEY_ENV, TEST_KEY, TreeFactory, next_kind, open_ready
from tests.actors.telemetry.receiver import Receiver
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(90)

VAD_START = {"voiceActivityDetectionSignal": {"vadSignalType": "VAD_SIGNAL_TYPE_SOS"}}
ACTIVITY_END = {"voiceActivity": {"voiceActivityType": "ACTIVITY_END", "audioOffset": "1.250s"}}
UNKNOWN = {"voiceActivity": {"voiceActivityType": "ACTIVITY_SOMETHING_NEW"}}
HEARD = {
    "serverContent": {
        "inputTranscription": {"text": "hallo", "languageCode": "de-DE", "speakerLabel": "spk_1"}
    }
}


def test_the_frames_are_the_services_own_schema() -> None:
    from google.genai import types  # the SDK accepts what the fake server sends here

    for frame in (VAD_START, ACTIVITY_END, HEARD):
        assert types.LiveServerMessage.model_validate(frame).model_dump(exclude_none=True)


def test_voice_activity_and_transcription_metadata_are_events(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        _, events = open_ready(client)
        for frame in (VAD_START, ACTIVITY_END, UNKNOWN, HEARD):
            server.inject(frame)
        signals = [next_kind(events, "voice_activity").payload for _ in range(3)]
        assert signals == [
            {"signal": "start"},
            {"signal": "end", "audio_offset_ms": 1250},
            {"signal": "unspecified"},  # a type phloem does not know is never passed through
        ]
        heard = next_kind(events, "input_transcription").payload
        assert heard == {
            "text": "hallo",
            "finished": False,
            "language": "de-DE",
            "speaker": "spk_1",
        }


@pytest.mark.parametrize(
    ("chars", "ok"), [(wire.MAX_LABEL_CHARS, True), (wire.MAX_LABEL_CHARS + 1, False)]
)
def test_transcription_labels_are_bounded(chars: int, ok: bool) -> None:
    frame = json.dumps({"serverContent": {"outputTranscription": {"languageCode": "x" * chars}}})
    if ok:
        assert wire.decode_server(frame).server_content is not None
    else:
        with pytest.raises(wire.LiveProtocolError) as info:
            wire.decode_server(frame)
        assert "languageCode" in info.value.path


def test_a_frame_with_two_primary_messages_is_still_refused() -> None:
    with pytest.raises(wire.LiveProtocolError):
        wire.decode_server(json.dumps({**VAD_START, **ACTIVITY_END}))


def _points(rx: Receiver, metric: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    return {tuple(sorted(p.attributes.items())): p.value for p in rx.latest_points(metric)}


def test_live_sessions_media_and_tool_calls_are_counted(
    server: FakeLiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    pcm_out = base64.b64encode(b"\x01" * 480).decode()
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": pcm_out}}
    with Receiver() as rx:
        telemetry = TelemetryConfig(
            enabled=True, endpoint=rx.endpoint, flush_interval_s=0.05, metric_interval_s=3600
        )
        live = LiveConfig(api_key_env=KEY_ENV, base_url=server.url, first_subscriber_wait_s=5.0)
        config = msgspec.structs.replace(Config(), live=live, telemetry=telemetry)
        with phloem.Tree.start(config) as tree, tree.client() as client:
            ref, events = open_ready(client)
            client.live_send(ref, audio=b"\x00" * 320)
            wait_until(lambda: any("realtimeInput" in f for f in server.connection().frames))
            server.inject({"serverContent": {"modelTurn": {"parts": [part]}}})
            next_kind(events, "audio")
            server.inject({"toolCall": {"functionCalls": [{"id": "c1", "name": "f", "args": {}}]}})
            next_kind(events, "tool_call")
            client.live_close(ref)
        sessions = _points(rx, "phloem.live.sessions")
        assert sessions[(("event", "opened"),)] == 1
        assert sessions[(("event", "closed"), ("reason", "client_closed"))] == 1
        media = _points(rx, "phloem.live.media.bytes")
        assert media[(("direction", "in"), ("kind", "audio"))] == 320
        assert media[(("direction", "out"), ("kind", "audio"))] == 480
        frames = _points(rx, "phloem.live.media.frames")
        assert frames[(("direction", "in"), ("kind", "audio"))] == 1
        assert _points(rx, "phloem.live.tool_calls") == {(("managed", False),): 1}
