"""The Live codec: server frames decoded strictly within their bounds (errors carry a JSON
path), and every client frame phloem sends accepted by the official SDK's own types
(`google.genai.types.LiveClientMessage`, a test-only dependency) as the oracle."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.genai import types

from phloem.actors.live.options import parse_options
from phloem.protocols import live as wire
from phloem.protocols.errors import PhloemError


def _error(frame: Any) -> wire.LiveProtocolError:
    raw = frame if isinstance(frame, str | bytes) else json.dumps(frame)
    with pytest.raises(wire.LiveProtocolError) as info:
        wire.decode_server(raw)
    return info.value


def test_server_frames_decode_text_and_binary() -> None:
    frame = {
        "serverContent": {
            "modelTurn": {
                "parts": [
                    {"text": "hi"},
                    {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAA="}},
                ]
            },
            "turnComplete": True,
        },
        "usageMetadata": {"totalTokenCount": 3},
    }
    for raw in (json.dumps(frame), json.dumps(frame).encode()):
        message = wire.decode_server(raw)
        assert message.server_content is not None and message.server_content.turn_complete
        assert message.usage_metadata is not None
        assert message.usage_metadata.total_token_count == 3
    update = wire.decode_server(
        b'{"sessionResumptionUpdate": {"newHandle": "h", "resumable": true}}'
    )
    assert update.session_resumption_update == wire.SessionResumptionUpdate("h", True)
    assert wire.primary_kind(wire.decode_server('{"usageMetadata": {}}')) == "usage_metadata"
    assert wire.decode_server('{"goAway": {"timeLeft": "1.5s"}}').go_away == wire.GoAway("1.5s")
    assert wire.duration_ms("1.5s") == 1500 and wire.duration_ms("x") is None


def test_schema_errors_name_the_path() -> None:
    err = _error({"serverContent": {"modelTurn": {"parts": [{"text": "a"}, {"text": 1}]}}})
    assert err.path == "$.serverContent.modelTurn.parts[1].text"
    err = _error({"toolCall": {"functionCalls": [{"id": "1", "args": {}}]}})
    assert err.path == "$.toolCall.functionCalls[0]" and "name" in err.reason
    assert _error("not json").path == "$"
    assert "more than one" in _error({"goAway": {}, "setupComplete": {}}).reason
    assert "no known message" in _error({"somethingElse": {}}).reason


def test_bounds_and_their_edges() -> None:
    parts = [{"text": "x"}] * wire.MAX_PARTS
    wire.decode_server(json.dumps({"serverContent": {"modelTurn": {"parts": parts}}}))
    err = _error({"serverContent": {"modelTurn": {"parts": [*parts, {"text": "y"}]}}})
    assert err.path == "$.serverContent.modelTurn.parts"
    calls = [{"id": str(i), "name": "f"} for i in range(wire.MAX_FUNCTION_CALLS)]
    wire.decode_server(json.dumps({"toolCall": {"functionCalls": calls}}))
    assert _error({"toolCall": {"functionCalls": [*calls, {"name": "g"}]}}).path == (
        "$.toolCall.functionCalls"
    )
    assert _error({"toolCall": {"functionCalls": []}}).path == "$.toolCall.functionCalls"
    handle = "h" * wire.MAX_HANDLE_BYTES
    wire.decode_server(json.dumps({"sessionResumptionUpdate": {"newHandle": handle}}))
    err = _error({"sessionResumptionUpdate": {"newHandle": handle + "h"}})
    assert err.path == "$.sessionResumptionUpdate.newHandle"
    pad = wire.MAX_SERVER_FRAME_BYTES - len(
        '{"serverContent":{"modelTurn":{"parts":[{"text":""}]}}}'
    )
    at_limit = '{"serverContent":{"modelTurn":{"parts":[{"text":"' + "x" * pad + '"}]}}}'
    assert len(at_limit) == wire.MAX_SERVER_FRAME_BYTES
    wire.decode_server(at_limit.encode())
    assert "exceeds" in _error(at_limit[:-1] + " }").reason
    wire.text_input("x" * wire.MAX_TEXT_INPUT_BYTES)
    with pytest.raises(wire.LiveProtocolError):
        wire.text_input("x" * (wire.MAX_TEXT_INPUT_BYTES + 1))
    wire.audio_input(b"\0" * wire.MAX_AUDIO_CHUNK_BYTES)
    with pytest.raises(wire.LiveProtocolError):
        wire.audio_input(b"\0" * (wire.MAX_AUDIO_CHUNK_BYTES + 1))
    with pytest.raises(wire.LiveProtocolError) as info:
        wire.decode_b64("!!", "$.x")
    assert info.value.path == "$.x"


FULL_CONFIG: dict[str, Any] = {
    "model": "gemini-3.1-flash-live-preview",
    "response_modalities": ["AUDIO"],
    "system_instruction": "Be brief.",
    "voice_name": "Puck",
    "input_audio_transcription": True,
    "output_audio_transcription": True,
    "automatic_activity_detection": False,
    "tools": [
        "google_search",
        {"name": "lookup", "description": "Look up", "parameters": {"type": "object"}},
    ],
    "session_resumption": True,
    "context_window_compression": {"target_tokens": 1000, "trigger_tokens": 2000},
    "media_resolution": "low",
    "thinking": {"level": "low", "include_thoughts": True},
}


def sdk_accepts(frame: bytes) -> None:
    """The SDK's `LiveClientMessage` validates the frame. `setup.realtimeInputConfig` is
    checked against the SDK's `RealtimeInputConfig` separately: the SDK's converter puts
    it there on the wire (`_live_converters`), but its `LiveClientSetup` model lacks it."""
    data = json.loads(frame)
    realtime_config = data.get("setup", {}).pop("realtimeInputConfig", None)
    if realtime_config is not None:
        types.RealtimeInputConfig.model_validate(realtime_config)
    types.LiveClientMessage.model_validate(data)


def test_every_client_frame_validates_against_the_sdk() -> None:
    options = parse_options(FULL_CONFIG, "unused")
    setup = options.setup
    resumed = wire.ClientMessage(
        setup=type(setup)(
            **{
                **{f: getattr(setup, f) for f in setup.__struct_fields__},
                "session_resumption": wire.SessionResumptionConfig("h"),
            }
        )
    )
    frames = [
        wire.ClientMessage(setup=setup),
        resumed,
        wire.ClientMessage(setup=parse_options(None, "gemini-x").setup),
        wire.text_input("hello"),
        wire.audio_input(b"\x01\x00" * 160),
        wire.video_input(b"\xff\xd8", "image/jpeg"),
        wire.video_input(b"\x89PNG", "image/png"),
        wire.activity_input("start"),
        wire.activity_input("end"),
        wire.audio_stream_end(),
        wire.tool_response([wire.FunctionResponse("c1", "lookup", {"result": [1, "a"]})]),
        wire.ClientMessage(
            client_content=wire.ClientContent([wire.ClientTurn([wire.ClientPart("hi")], "user")])
        ),
    ]
    for message in frames:
        sdk_accepts(wire.encode_client(message))
    decoded = types.LiveClientMessage.model_validate_json(
        wire.encode_client(frames[0]).replace(
            b',"realtimeInputConfig":{"automaticActivityDetection":{"disabled":true}}', b""
        )
    )
    assert (
        decoded.setup is not None and decoded.setup.model == "models/gemini-3.1-flash-live-preview"
    )
    config = decoded.setup.generation_config
    assert (
        config is not None and config.media_resolution == types.MediaResolution.MEDIA_RESOLUTION_LOW
    )
    assert config.thinking_config is not None
    assert config.thinking_config.thinking_level == types.ThinkingLevel.LOW


def test_a_frame_the_sdk_rejects_is_caught_by_the_oracle() -> None:
    with pytest.raises(ValueError):
        sdk_accepts(b'{"setup": {"model": "m", "generationConfig": {"voice": 1}}}')
    with pytest.raises(ValueError):
        wire.encode_client(wire.ClientMessage())


def test_options_errors_name_the_key() -> None:
    for bad, key in [
        ({"nope": 1}, "nope"),
        ({"thinking": "extreme"}, "thinking.level"),
        ({"tools": [{"name": "x", "extra": 1}]}, "tools[0]"),
        ({"voice_name": "v" * 129}, "voice_name"),
        ({"media_resolution": "ultra"}, "media_resolution"),
        ({"session_resumption": "yes"}, "session_resumption"),
    ]:
        with pytest.raises(PhloemError) as info:
            parse_options(bad, "m")
        assert info.value.kind == "invalid_live_config"
        assert key in info.value.message
    parse_options({"voice_name": "v" * 128}, "m")
    assert parse_options({"tools": ["google_search"] * 128}, "m").setup.tools is not None
    with pytest.raises(PhloemError):
        parse_options({"tools": ["google_search"] * 129}, "m")
