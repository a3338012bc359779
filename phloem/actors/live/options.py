"""`live_open`'s config mapping → the `setup` frame of a session.

Keys (all optional; an unknown key, or a bad value, is `invalid_live_config` naming it):

    model                         "models/…" or a bare name (default `[live] model`)
    response_modalities           ["AUDIO"] (default) or ["TEXT"]
    system_instruction            text (≤ 64 KiB)
    voice_name                    a prebuilt voice (≤ 128 bytes)
    input_audio_transcription     bool (default False)
    output_audio_transcription    bool (default False)
    automatic_activity_detection  bool (default True; False: send activity start/end)
    tools                         ≤ 128 of "google_search" or {name, description, parameters}
    session_resumption            bool (default True)
    context_window_compression    bool or {target_tokens, trigger_tokens}
    media_resolution              "low" | "medium" | "high"
    thinking                      "minimal" | "low" | "medium" | "high", or
                                  {level, include_thoughts}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from phloem.protocols import live as wire
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import json_size

KEYS = (
    "model",
    "response_modalities",
    "system_instruction",
    "voice_name",
    "input_audio_transcription",
    "output_audio_transcription",
    "automatic_activity_detection",
    "tools",
    "session_resumption",
    "context_window_compression",
    "media_resolution",
    "thinking",
)


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """A validated session config: its setup frame (without a handle) and what the
    session itself needs to know."""

    setup: wire.Setup
    resumption: bool
    manual_activity: bool


def _bad(key: str, why: str) -> NoReturn:
    raise PhloemError(ErrorKind.INVALID_LIVE_CONFIG, f"live config {key}: {why}")


def _bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        _bad(key, "must be true or false")
    return value


def _text(value: Any, key: str, limit: int) -> str:
    if not isinstance(value, str):
        _bad(key, "must be a string")
    if len(value.encode()) > limit:
        _bad(key, f"must be at most {limit} bytes")
    return value


def parse_options(config: Mapping[str, Any] | None, default_model: str) -> SessionOptions:
    """Validate `config` (see the module docstring) into `SessionOptions`."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(KEYS), key=str)
    if unknown:
        _bad(str(unknown[0]), f"unknown key (known: {', '.join(KEYS)})")
    model = _text(config.get("model", default_model), "model", wire.MAX_MODEL_CHARS)
    if not model or any(c.isspace() for c in model):
        _bad("model", "must be a model name without spaces")
    if not model.startswith("models/"):
        model = f"models/{model}"
    modalities = config.get("response_modalities", ["AUDIO"])
    if (
        not isinstance(modalities, list | tuple)
        or len(modalities) != 1
        or modalities[0] not in wire.MODALITIES
    ):
        _bad("response_modalities", 'must be ["AUDIO"] or ["TEXT"]')
    speech = None
    if "voice_name" in config:
        voice = _text(config["voice_name"], "voice_name", wire.MAX_VOICE_NAME_BYTES)
        speech = wire.SpeechConfig(wire.VoiceConfig(wire.PrebuiltVoiceConfig(voice)))
    resolution = None
    if "media_resolution" in config:
        value = config["media_resolution"]
        if value not in wire.MEDIA_RESOLUTIONS:
            _bad("media_resolution", "must be low, medium or high")
        resolution = wire.MEDIA_RESOLUTIONS[value]
    generation = wire.GenerationConfig(
        response_modalities=[str(modalities[0])],
        speech_config=speech,
        thinking_config=_thinking(config.get("thinking")),
        media_resolution=resolution,
    )
    instruction = None
    if "system_instruction" in config:
        text = _text(
            config["system_instruction"], "system_instruction", wire.MAX_SYSTEM_INSTRUCTION_BYTES
        )
        instruction = wire.ClientTurn([wire.ClientPart(text=text)])
    automatic = _bool(config, "automatic_activity_detection", True)
    resumption = _bool(config, "session_resumption", True)
    transcribe = wire.AudioTranscriptionConfig()
    setup = wire.Setup(
        model=model,
        generation_config=generation,
        system_instruction=instruction,
        tools=_tools(config.get("tools")),
        realtime_input_config=(
            None
            if automatic
            else wire.RealtimeInputConfig(wire.AutomaticActivityDetection(disabled=True))
        ),
        session_resumption=wire.SessionResumptionConfig() if resumption else None,
        context_window_compression=_compression(config.get("context_window_compression")),
        input_audio_transcription=(
            transcribe if _bool(config, "input_audio_transcription", False) else None
        ),
        output_audio_transcription=(
            transcribe if _bool(config, "output_audio_transcription", False) else None
        ),
    )
    return SessionOptions(setup=setup, resumption=resumption, manual_activity=not automatic)


def _thinking(value: Any) -> wire.ThinkingConfig | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = {"level": value}
    if not isinstance(value, Mapping) or set(value) - {"level", "include_thoughts"}:
        _bad("thinking", "must be a level or {level, include_thoughts}")
    level = value.get("level")
    if level is not None and level not in wire.THINKING_LEVELS:
        _bad("thinking.level", f"must be one of {', '.join(wire.THINKING_LEVELS)}")
    include = value.get("include_thoughts")
    if include is not None and not isinstance(include, bool):
        _bad("thinking.include_thoughts", "must be true or false")
    return wire.ThinkingConfig(
        thinking_level=None if level is None else str(level).upper(), include_thoughts=include
    )


def _compression(value: Any) -> wire.ContextWindowCompression | None:
    if value is None or value is False:
        return None
    if value is True:
        return wire.ContextWindowCompression(wire.SlidingWindow())
    if not isinstance(value, Mapping) or set(value) - {"target_tokens", "trigger_tokens"}:
        _bad("context_window_compression", "must be a bool or {target_tokens, trigger_tokens}")
    for key in ("target_tokens", "trigger_tokens"):
        n = value.get(key)
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            _bad(f"context_window_compression.{key}", "must be a positive int")
    return wire.ContextWindowCompression(
        wire.SlidingWindow(value.get("target_tokens")), value.get("trigger_tokens")
    )


def _tools(value: Any) -> list[wire.ToolDeclaration] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) > wire.MAX_TOOLS:
        _bad("tools", f"must be a list of at most {wire.MAX_TOOLS} tools")
    functions: list[wire.FunctionDeclaration] = []
    search = False
    for i, tool in enumerate(value):
        key = f"tools[{i}]"
        if tool == "google_search":
            search = True
            continue
        if not isinstance(tool, Mapping) or "name" not in tool:
            _bad(key, 'must be "google_search" or {name, description, parameters}')
        if set(tool) - {"name", "description", "parameters"}:
            _bad(key, "has keys other than name, description, parameters")
        name = _text(tool["name"], f"{key}.name", wire.MAX_TOOL_NAME_BYTES)
        description = tool.get("description")
        if description is not None:
            _text(description, f"{key}.description", wire.MAX_TOOL_DESCRIPTION_BYTES)
        parameters = tool.get("parameters")
        if parameters is not None:
            if not isinstance(parameters, Mapping):
                _bad(f"{key}.parameters", "must be a JSON schema object")
            if json_size(parameters) > wire.MAX_TOOL_SCHEMA_BYTES:
                _bad(f"{key}.parameters", f"must be at most {wire.MAX_TOOL_SCHEMA_BYTES} bytes")
            parameters = dict(parameters)
        functions.append(wire.FunctionDeclaration(name, description, parameters))
    tools: list[wire.ToolDeclaration] = []
    if functions:
        tools.append(wire.ToolDeclaration(function_declarations=functions))
    if search:
        tools.append(wire.ToolDeclaration(google_search=wire.GoogleSearch()))
    return tools or None
