"""The Gemini Live WebSocket protocol (`BidiGenerateContent`): a strict, bounded codec.

Client frames (what phloem sends) are built from the structs below and encoded to JSON
with the service's camelCase names (`encode_client`); every one of them is accepted by
the official SDK's own `LiveClientMessage` type (a test checks that, the SDK is never
imported here). Server frames are decoded with `decode_server`, which checks, before and
while decoding:

- the frame's size (`MAX_SERVER_FRAME_BYTES`), text or binary (the service sends JSON in
  binary WebSocket frames);
- its nesting (`MAX_NESTING_DEPTH` arrays and objects, `phloem.protocols.depth`), before
  a decoder that recurses sees it;
- the schema: every known field has its type, lists and strings their bounds
  (`MAX_PARTS`, `MAX_FUNCTION_CALLS`, `MAX_HANDLE_BYTES`, ...);
- its integers, in free-form JSON (`args`, `groundingMetadata`) too: within
  `MIN_FRAME_INT` .. `MAX_FRAME_INT`, what the event stream (msgpack) can carry;
- exactly one primary message (`setupComplete`, `serverContent`, `toolCall`,
  `toolCallCancellation`, `goAway`, `sessionResumptionUpdate`, the voice-activity
  signals `voiceActivityDetectionSignal` and `voiceActivity`), optionally with
  `usageMetadata`, or `usageMetadata` alone.

Provider enumerations (a VAD signal's type) are mapped onto phloem's own closed
vocabulary (`VOICE_SIGNALS`), never passed through as new names; transcription metadata
(`languageCode`, `speakerLabel`) is bounded (`MAX_LABEL_CHARS`).

A frame that breaks any of these is a `LiveProtocolError` naming a JSON path
(`$.serverContent.modelTurn.parts[3].text`) and the reason; so is any other failure to
decode it (`decode_server` raises nothing else, whatever the input). Fields the codec does not
know are ignored, so that a field the service adds later does not end live sessions.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Final

import msgspec

from phloem.protocols.depth import MAX_NESTING_DEPTH, NestingTooDeep, check_json_depth

# --- named bounds ------------------------------------------------------------------------

MAX_SERVER_FRAME_BYTES: Final = 8 * 1024 * 1024
MAX_PARTS: Final = 128
MAX_FUNCTION_CALLS: Final = 128
MAX_CANCELLED_IDS: Final = 128
MAX_HANDLE_BYTES: Final = 64 * 1024
MAX_TEXT_INPUT_BYTES: Final = 64 * 1024
MAX_SYSTEM_INSTRUCTION_BYTES: Final = 64 * 1024
MAX_VOICE_NAME_BYTES: Final = 128
MAX_TOOLS: Final = 128
MAX_TOOL_NAME_BYTES: Final = 128
MAX_TOOL_DESCRIPTION_BYTES: Final = 4096
MAX_TOOL_SCHEMA_BYTES: Final = 256 * 1024
MAX_AUDIO_CHUNK_BYTES: Final = 1024 * 1024
MAX_VIDEO_FRAME_BYTES: Final = 4 * 1024 * 1024
MAX_TOOL_RESPONSE_BYTES: Final = 1024 * 1024
MAX_ID_CHARS: Final = 256
MAX_MODEL_CHARS: Final = 256
MAX_LABEL_CHARS: Final = 64  # a transcription's language code or speaker label
# The integers a server frame may hold: int64, which msgpack (the event stream) carries.
MIN_FRAME_INT: Final = -(2**63)
MAX_FRAME_INT: Final = 2**63 - 1

INPUT_AUDIO_MIME: Final = "audio/pcm;rate=16000"
VIDEO_MIMES: Final = ("image/jpeg", "image/png")
MODALITIES: Final = ("TEXT", "AUDIO")
MEDIA_RESOLUTIONS: Final = {
    "low": "MEDIA_RESOLUTION_LOW",
    "medium": "MEDIA_RESOLUTION_MEDIUM",
    "high": "MEDIA_RESOLUTION_HIGH",
}
THINKING_LEVELS: Final = ("minimal", "low", "medium", "high")
API_VERSIONS: Final = ("v1beta", "v1", "v1alpha")
WS_PATH: Final = (
    "/ws/google.ai.generativelanguage.{api_version}.GenerativeService.BidiGenerateContent"
)


class LiveProtocolError(Exception):
    """A frame that breaks the schema or a bound: `path` (JSON path) and `reason`."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{reason} at {path}")
        self.path = path
        self.reason = reason


def ws_path(api_version: str) -> str:
    """The endpoint path for `api_version` (`v1beta`, `v1`, `v1alpha`)."""
    if api_version not in API_VERSIONS:
        raise ValueError(f"api_version must be one of {', '.join(API_VERSIONS)}")
    return WS_PATH.format(api_version=api_version)


# --- shared shapes -----------------------------------------------------------------------


class _Wire(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of every wire struct: camelCase names, absent fields left out."""


class Blob(_Wire):
    mime_type: str
    data: str  # base64


# --- client frames -----------------------------------------------------------------------


class ClientPart(_Wire):
    text: str | None = None
    inline_data: Blob | None = None


class ClientTurn(_Wire):
    parts: list[ClientPart]
    role: str | None = None


class PrebuiltVoiceConfig(_Wire):
    voice_name: str


class VoiceConfig(_Wire):
    prebuilt_voice_config: PrebuiltVoiceConfig


class SpeechConfig(_Wire):
    voice_config: VoiceConfig


class ThinkingConfig(_Wire):
    thinking_level: str | None = None
    include_thoughts: bool | None = None


class GenerationConfig(_Wire):
    response_modalities: list[str] | None = None
    speech_config: SpeechConfig | None = None
    thinking_config: ThinkingConfig | None = None
    media_resolution: str | None = None


class AutomaticActivityDetection(_Wire):
    disabled: bool | None = None


class RealtimeInputConfig(_Wire):
    automatic_activity_detection: AutomaticActivityDetection | None = None


class SessionResumptionConfig(_Wire):
    handle: str | None = None


class SlidingWindow(_Wire):
    target_tokens: int | None = None


class ContextWindowCompression(_Wire):
    sliding_window: SlidingWindow
    trigger_tokens: int | None = None


class AudioTranscriptionConfig(_Wire):
    pass


class FunctionDeclaration(_Wire):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class GoogleSearch(_Wire):
    pass


class ToolDeclaration(_Wire):
    function_declarations: list[FunctionDeclaration] | None = None
    google_search: GoogleSearch | None = None


class Setup(_Wire):
    model: str
    generation_config: GenerationConfig | None = None
    system_instruction: ClientTurn | None = None
    tools: list[ToolDeclaration] | None = None
    realtime_input_config: RealtimeInputConfig | None = None
    session_resumption: SessionResumptionConfig | None = None
    context_window_compression: ContextWindowCompression | None = None
    input_audio_transcription: AudioTranscriptionConfig | None = None
    output_audio_transcription: AudioTranscriptionConfig | None = None


class ActivityMarker(_Wire):
    pass


class RealtimeInput(_Wire):
    text: str | None = None
    audio: Blob | None = None
    video: Blob | None = None
    activity_start: ActivityMarker | None = None
    activity_end: ActivityMarker | None = None
    audio_stream_end: bool | None = None


class ClientContent(_Wire):
    turns: list[ClientTurn]
    turn_complete: bool = True


class FunctionResponse(_Wire):
    id: str
    name: str
    response: dict[str, Any]


class ToolResponse(_Wire):
    function_responses: list[FunctionResponse]


class ClientMessage(_Wire):
    """One client frame: exactly one of its fields is set."""

    setup: Setup | None = None
    realtime_input: RealtimeInput | None = None
    client_content: ClientContent | None = None
    tool_response: ToolResponse | None = None


_client_encoder = msgspec.json.Encoder()


def encode_client(message: ClientMessage) -> bytes:
    """The JSON text of one client frame (exactly one field set, else ValueError)."""
    set_fields = [f for f in message.__struct_fields__ if getattr(message, f) is not None]
    if len(set_fields) != 1:
        raise ValueError(f"a client frame has exactly one message, not {len(set_fields)}")
    return _client_encoder.encode(message)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def text_input(text: str) -> ClientMessage:
    """`realtimeInput.text` (at most `MAX_TEXT_INPUT_BYTES` of UTF-8)."""
    if len(text.encode()) > MAX_TEXT_INPUT_BYTES:
        raise LiveProtocolError("$.realtimeInput.text", f"longer than {MAX_TEXT_INPUT_BYTES} bytes")
    return ClientMessage(realtime_input=RealtimeInput(text=text))


def audio_input(pcm: bytes) -> ClientMessage:
    """`realtimeInput.audio`: 16 kHz 16-bit mono PCM, base64 on the wire."""
    if len(pcm) > MAX_AUDIO_CHUNK_BYTES:
        raise LiveProtocolError(
            "$.realtimeInput.audio", f"longer than {MAX_AUDIO_CHUNK_BYTES} bytes"
        )
    return ClientMessage(realtime_input=RealtimeInput(audio=Blob(INPUT_AUDIO_MIME, b64(pcm))))


def video_input(frame: bytes, mime_type: str = "image/jpeg") -> ClientMessage:
    """`realtimeInput.video`: one JPEG or PNG frame."""
    if mime_type not in VIDEO_MIMES:
        raise LiveProtocolError("$.realtimeInput.video.mimeType", "must be image/jpeg or image/png")
    if len(frame) > MAX_VIDEO_FRAME_BYTES:
        raise LiveProtocolError(
            "$.realtimeInput.video", f"longer than {MAX_VIDEO_FRAME_BYTES} bytes"
        )
    return ClientMessage(realtime_input=RealtimeInput(video=Blob(mime_type, b64(frame))))


def activity_input(which: str) -> ClientMessage:
    """`activityStart` / `activityEnd` (manual activity detection only)."""
    if which == "start":
        return ClientMessage(realtime_input=RealtimeInput(activity_start=ActivityMarker()))
    if which == "end":
        return ClientMessage(realtime_input=RealtimeInput(activity_end=ActivityMarker()))
    raise LiveProtocolError("$.realtimeInput", "activity must be 'start' or 'end'")


def audio_stream_end() -> ClientMessage:
    return ClientMessage(realtime_input=RealtimeInput(audio_stream_end=True))


def tool_response(responses: list[FunctionResponse]) -> ClientMessage:
    return ClientMessage(tool_response=ToolResponse(responses))


# --- server frames -----------------------------------------------------------------------

_Str = Annotated[str, msgspec.Meta(max_length=MAX_SERVER_FRAME_BYTES)]
_Id = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]
_Int = Annotated[int, msgspec.Meta(ge=MIN_FRAME_INT, le=MAX_FRAME_INT)]


class InlineData(_Wire):
    mime_type: _Str = ""
    data: _Str = ""


class FunctionCall(_Wire):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOOL_NAME_BYTES)]
    id: _Id | None = None
    args: dict[str, Any] = {}


class ExecutableCode(_Wire):
    language: _Str = ""
    code: _Str = ""


class CodeExecutionResult(_Wire):
    outcome: _Str = ""
    output: _Str = ""


class ServerPart(_Wire):
    text: _Str | None = None
    thought: bool | None = None
    inline_data: InlineData | None = None
    function_call: FunctionCall | None = None
    executable_code: ExecutableCode | None = None
    code_execution_result: CodeExecutionResult | None = None


class ModelTurn(_Wire):
    parts: Annotated[list[ServerPart], msgspec.Meta(max_length=MAX_PARTS)] = []
    role: str | None = None


_Label = Annotated[str, msgspec.Meta(max_length=MAX_LABEL_CHARS)]


class Transcription(_Wire):
    text: _Str = ""
    finished: bool | None = None
    language_code: _Label | None = None  # BCP-47
    speaker_label: _Label | None = None


class ServerContent(_Wire):
    model_turn: ModelTurn | None = None
    generation_complete: bool = False
    turn_complete: bool = False
    interrupted: bool = False
    input_transcription: Transcription | None = None
    output_transcription: Transcription | None = None
    turn_complete_reason: str | None = None
    waiting_for_input: bool | None = None
    grounding_metadata: dict[str, Any] | None = None


class ToolCall(_Wire):
    function_calls: Annotated[
        list[FunctionCall], msgspec.Meta(min_length=1, max_length=MAX_FUNCTION_CALLS)
    ]


class ToolCallCancellation(_Wire):
    ids: Annotated[list[_Id], msgspec.Meta(max_length=MAX_CANCELLED_IDS)] = []


class GoAway(_Wire):
    time_left: str | None = None  # a protobuf Duration: "12.5s"


class SessionResumptionUpdate(_Wire):
    new_handle: Annotated[str, msgspec.Meta(max_length=MAX_HANDLE_BYTES)] | None = None
    resumable: bool = False


class VoiceActivityDetectionSignal(_Wire):
    vad_signal_type: _Label | None = None  # VAD_SIGNAL_TYPE_SOS | VAD_SIGNAL_TYPE_EOS


class VoiceActivity(_Wire):
    voice_activity_type: _Label | None = None  # ACTIVITY_START | ACTIVITY_END
    audio_offset: _Label | None = None  # a protobuf Duration: "1.250s"


VOICE_SIGNALS: Final = {
    "VAD_SIGNAL_TYPE_SOS": "start",
    "VAD_SIGNAL_TYPE_EOS": "end",
    "ACTIVITY_START": "start",
    "ACTIVITY_END": "end",
}
"""Provider voice-activity types -> phloem's signal (any other type: `unspecified`)."""


def voice_signal(provider_type: str | None) -> str:
    """`start`, `end` or `unspecified`: never the provider's own spelling."""
    return VOICE_SIGNALS.get(provider_type or "", "unspecified")


class SetupComplete(_Wire):
    session_id: str | None = None


class UsageMetadata(_Wire):
    prompt_token_count: _Int | None = None
    response_token_count: _Int | None = None
    total_token_count: _Int | None = None
    thoughts_token_count: _Int | None = None
    tool_use_prompt_token_count: _Int | None = None
    cached_content_token_count: _Int | None = None


class ServerMessage(_Wire):
    """One server frame: one primary message, optionally with `usage_metadata`."""

    setup_complete: SetupComplete | None = None
    server_content: ServerContent | None = None
    tool_call: ToolCall | None = None
    tool_call_cancellation: ToolCallCancellation | None = None
    go_away: GoAway | None = None
    session_resumption_update: SessionResumptionUpdate | None = None
    voice_activity_detection_signal: VoiceActivityDetectionSignal | None = None
    voice_activity: VoiceActivity | None = None
    usage_metadata: UsageMetadata | None = None


PRIMARY_FIELDS: Final = (
    "setup_complete",
    "server_content",
    "tool_call",
    "tool_call_cancellation",
    "go_away",
    "session_resumption_update",
    "voice_activity_detection_signal",
    "voice_activity",
)
_server_decoder = msgspec.json.Decoder(ServerMessage)
_AT_PATH = re.compile(r"^(.*) - at `(\$[^`]*)`$", re.DOTALL)


def decode_server(frame: bytes | str) -> ServerMessage:
    """Decode and check one server frame (see the module docstring); any failure is a
    `LiveProtocolError`."""
    try:
        raw = frame if isinstance(frame, bytes) else frame.encode()
    except UnicodeEncodeError:
        raise LiveProtocolError("$", "text frame is not valid UTF-8") from None
    if len(raw) > MAX_SERVER_FRAME_BYTES:
        raise LiveProtocolError("$", f"frame of {len(raw)} bytes exceeds {MAX_SERVER_FRAME_BYTES}")
    try:
        check_json_depth(raw, MAX_NESTING_DEPTH)
        message = _server_decoder.decode(raw)
    except NestingTooDeep as exc:
        raise LiveProtocolError("$", str(exc)) from None
    except msgspec.ValidationError as exc:
        match = _AT_PATH.match(str(exc))
        if match is None:
            raise LiveProtocolError("$", str(exc)) from None
        raise LiveProtocolError(match.group(2), match.group(1)) from None
    except msgspec.DecodeError as exc:
        raise LiveProtocolError("$", f"not JSON: {exc}") from None
    except Exception as exc:  # RecursionError or any other surprise: still a bad frame
        raise LiveProtocolError("$", f"undecodable frame ({type(exc).__name__})") from None
    primary = [f for f in PRIMARY_FIELDS if getattr(message, f) is not None]
    if len(primary) > 1:
        raise LiveProtocolError("$", f"more than one message: {', '.join(primary)}")
    if not primary and message.usage_metadata is None:
        raise LiveProtocolError("$", "no known message")
    _check_free_ints(message)
    return message


def _check_free_ints(message: ServerMessage) -> None:
    """The integers of the free-form fields within `MIN_FRAME_INT` .. `MAX_FRAME_INT`."""
    free: list[tuple[str, Any]] = []
    if message.tool_call is not None:
        for i, call in enumerate(message.tool_call.function_calls):
            free.append((f"$.toolCall.functionCalls[{i}].args", call.args))
    content = message.server_content
    if content is not None and content.grounding_metadata is not None:
        free.append(("$.serverContent.groundingMetadata", content.grounding_metadata))
    for path, value in free:
        where = _int_out_of_range(value)
        if where is not None:
            raise LiveProtocolError(
                path + where, f"integer outside {MIN_FRAME_INT} .. {MAX_FRAME_INT}"
            )


def _int_out_of_range(value: Any) -> str | None:
    """The relative path of the first integer out of range in decoded JSON, or None
    (the depth is bounded by `MAX_NESTING_DEPTH`, so the recursion is too)."""
    kind = type(value)
    if kind is int:
        return None if MIN_FRAME_INT <= value <= MAX_FRAME_INT else ""
    if kind is dict:
        for key, item in value.items():
            where = _int_out_of_range(item)
            if where is not None:
                return f".{key}{where}"
    elif kind is list:
        for i, item in enumerate(value):
            where = _int_out_of_range(item)
            if where is not None:
                return f"[{i}]{where}"
    return None


def primary_kind(message: ServerMessage) -> str:
    """The primary field set in `message` (`usage_metadata` if it is alone)."""
    for name in PRIMARY_FIELDS:
        if getattr(message, name) is not None:
            return name
    return "usage_metadata"


def decode_b64(data: str, path: str) -> bytes:
    """Strict base64 (what `inlineData.data` holds) or a `LiveProtocolError` at `path`."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise LiveProtocolError(path, "not valid base64") from None


_DURATION = re.compile(r"^(\d{1,12})(?:\.(\d{1,9}))?s$")


def duration_ms(text: str | None) -> int | None:
    """A protobuf Duration (`"12.5s"`) in milliseconds; None if absent or malformed."""
    if text is None:
        return None
    match = _DURATION.match(text)
    if match is None:
        return None
    whole, frac = match.group(1), (match.group(2) or "0")
    return int(whole) * 1000 + int((frac + "000")[:3])
