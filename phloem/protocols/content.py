"""Provider-neutral model requests and responses, in ADK's content shape.

A conversation is a sequence of `Content(role, parts)`; role is `user` or `model` (function
responses travel as `user` content, as in ADK). Each `Part` carries exactly one payload:
`text` (optionally a `thought`), `function_call`, `function_response` or `inline_data`.
Provider codecs (`phloem.protocols.gemini`, `.openai_chat`, `.openai_responses`) translate
these to and from the wire; agents and planners only ever see this shape.

Every type is a frozen msgspec `Struct` and round-trips through `msgspec.json`
(bytes travel as base64). Sequences are tuples so that a request can be shared safely.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final, Literal

import msgspec

from phloem.protocols.limits import check_range

ROLES: Final = frozenset({"user", "model"})
"""Roles a `Content` may carry."""

FINISH_REASONS: Final = frozenset(
    {"STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL", "OTHER"}
)
"""Normalised finish reasons; codecs map provider-specific values onto these."""

FUNCTION_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
"""Function names accepted by every supported provider (Gemini and OpenAI alike)."""

MAX_TEMPERATURE: Final = 2.0
MIN_THINKING_BUDGET: Final = -1
"""-1 asks the provider for a dynamic thinking budget (Gemini semantics)."""

ToolChoice = Literal["auto", "none", "required"]
FinishReason = Literal[
    "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL", "OTHER"
]


class FunctionCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """A call the model asks for. `id` pairs it with its `FunctionResponse` (may be absent)."""

    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("function_call.name must not be empty")


class RawToolResult:
    """A tool result to send verbatim: any JSON value — a scalar, an array, an object or
    null — instead of the object a result normally is (an object otherwise becomes
    `{"result": value}`). Encoded (and so checked) when made: a value JSON cannot hold is
    a `ValueError` that names no part of it. Only the OpenAI Chat protocol can send it
    (as the tool message's content); Responses, Gemini and the durable session store
    refuse it (`invalid_tool_result`) rather than change it."""

    __slots__ = ("json",)

    def __init__(self, value: Any) -> None:
        try:
            self.json = msgspec.json.encode(value).decode("utf-8")
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
            raise ValueError("a raw tool result must be a JSON value") from None

    def __repr__(self) -> str:
        return f"RawToolResult({len(self.json)} bytes)"


class FunctionResponse(msgspec.Struct, frozen=True, omit_defaults=True):
    """The result of a `FunctionCall`, sent back to the model as `user` content. `raw`
    holds the JSON text of a `RawToolResult` (then `response` is empty)."""

    name: str
    response: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None
    raw: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("function_response.name must not be empty")


class Blob(msgspec.Struct, frozen=True):
    """Inline binary data (an image, audio clip, PDF) with its MIME type."""

    mime_type: str
    data: bytes

    def __post_init__(self) -> None:
        if "/" not in self.mime_type:
            raise ValueError("inline_data.mime_type must look like type/subtype")


class Part(msgspec.Struct, frozen=True, omit_defaults=True):
    """One piece of a `Content`: exactly one of text, function_call, function_response,
    inline_data. `thought=True` marks text as model reasoning; `thought_signature` is the
    provider's opaque token that must be sent back unchanged with the part it came on."""

    text: str | None = None
    thought: bool = False
    thought_signature: bytes | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    inline_data: Blob | None = None

    def __post_init__(self) -> None:
        payloads = sum(
            x is not None
            for x in (self.text, self.function_call, self.function_response, self.inline_data)
        )
        if payloads != 1:
            raise ValueError(
                "part must carry exactly one of text, function_call, function_response, inline_data"
            )
        if self.thought and self.text is None:
            raise ValueError("part.thought requires text")

    @classmethod
    def from_text(cls, text: str) -> Part:
        return cls(text=text)

    @classmethod
    def from_thought(cls, text: str, signature: bytes | None = None) -> Part:
        return cls(text=text, thought=True, thought_signature=signature)

    @classmethod
    def from_function_call(
        cls, name: str, args: dict[str, Any] | None = None, id: str | None = None
    ) -> Part:
        return cls(function_call=FunctionCall(name=name, args=dict(args or {}), id=id))

    @classmethod
    def from_function_response(
        cls, name: str, response: dict[str, Any] | RawToolResult, id: str | None = None
    ) -> Part:
        if isinstance(response, RawToolResult):
            raw = FunctionResponse(name=name, id=id, raw=response.json)
            return cls(function_response=raw)
        return cls(function_response=FunctionResponse(name=name, response=response, id=id))

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str) -> Part:
        return cls(inline_data=Blob(mime_type=mime_type, data=data))


class Content(msgspec.Struct, frozen=True):
    """One turn of the conversation: a role and its ordered parts."""

    role: str
    parts: tuple[Part, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"content.role must be one of user, model (got {self.role!r})")

    @classmethod
    def user(cls, text: str) -> Content:
        return cls(role="user", parts=(Part.from_text(text),))

    @classmethod
    def model(cls, text: str) -> Content:
        return cls(role="model", parts=(Part.from_text(text),))

    @property
    def text(self) -> str:
        """The concatenated non-thought text of this content."""
        return text_of(self.parts)

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        return function_calls_of(self.parts)


class FunctionDeclaration(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool the model may call: name, description and a JSON schema for its arguments
    (an `object` schema, or None for a tool without arguments)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not FUNCTION_NAME_RE.match(self.name):
            raise ValueError(
                "function_declaration.name must match [A-Za-z_][A-Za-z0-9_-]{0,63}"
                f" (got {self.name!r})"
            )
        if self.parameters is not None and self.parameters.get("type", "object") != "object":
            raise ValueError("function_declaration.parameters must be an object schema")


class ThinkingConfig(msgspec.Struct, frozen=True, omit_defaults=True):
    """Reasoning controls: whether to return thought parts, and a token budget for them
    (0 disables thinking, -1 lets the provider decide)."""

    include_thoughts: bool | None = None
    thinking_budget: int | None = None

    def __post_init__(self) -> None:
        if self.thinking_budget is not None:
            check_range(
                "thinking_config.thinking_budget", self.thinking_budget, MIN_THINKING_BUDGET, None
            )


class GenerateConfig(msgspec.Struct, frozen=True, omit_defaults=True):
    """Generation settings. `tool_choice` is `auto` (model decides), `none` (no calls) or
    `required` (must call some tool); `forced_function` requires a call of that one tool."""

    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop_sequences: tuple[str, ...] = ()
    thinking_config: ThinkingConfig | None = None
    tool_choice: ToolChoice = "auto"
    forced_function: str | None = None

    def __post_init__(self) -> None:
        if self.max_output_tokens is not None:
            check_range("config.max_output_tokens", self.max_output_tokens, 1, None)
        if self.temperature is not None:
            check_range("config.temperature", self.temperature, 0, MAX_TEMPERATURE, integer=False)
        if self.top_p is not None:
            check_range("config.top_p", self.top_p, 0, 1, integer=False)
        if self.forced_function is not None and self.tool_choice == "none":
            raise ValueError("config.forced_function cannot be combined with tool_choice none")


class ModelRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """Everything one model call needs; `model` may override the provider's default model."""

    contents: tuple[Content, ...] = ()
    system_instruction: str | None = None
    tools: tuple[FunctionDeclaration, ...] = ()
    config: GenerateConfig = msgspec.field(default_factory=GenerateConfig)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError("tools must have unique names")
        forced = self.config.forced_function
        if forced is not None and forced not in names:
            raise ValueError(f"config.forced_function {forced!r} is not a declared tool")
        if self.config.tool_choice == "required" and not self.tools:
            raise ValueError("config.tool_choice required needs at least one tool")


class Usage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Token counts for one call (or a sum of calls). `thoughts_tokens` are the reasoning
    tokens, counted inside `output_tokens` only if the provider counts them there."""

    input_tokens: int = 0
    output_tokens: int = 0
    thoughts_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            thoughts_tokens=self.thoughts_tokens + other.thoughts_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class ModelResponse(msgspec.Struct, frozen=True, omit_defaults=True):
    """One model answer. In a stream, `partial=True` chunks carry deltas and the last
    item (`partial=False`) carries the whole aggregated answer."""

    content: Content | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    model_version: str | None = None
    response_id: str | None = None
    partial: bool = False

    @classmethod
    def from_text(cls, text: str, *, finish_reason: FinishReason = "STOP") -> ModelResponse:
        return cls(content=Content.model(text), finish_reason=finish_reason)

    @classmethod
    def from_parts(
        cls, parts: Iterable[Part], *, finish_reason: FinishReason = "STOP"
    ) -> ModelResponse:
        return cls(content=Content(role="model", parts=tuple(parts)), finish_reason=finish_reason)

    @property
    def parts(self) -> tuple[Part, ...]:
        return self.content.parts if self.content is not None else ()

    @property
    def text(self) -> str:
        """The concatenated non-thought text of the answer ("" when there is none)."""
        return text_of(self.parts)

    @property
    def thoughts(self) -> str:
        return "".join(p.text for p in self.parts if p.thought and p.text is not None)

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        return function_calls_of(self.parts)


def text_of(parts: Iterable[Part]) -> str:
    """Concatenate the text of the non-thought text parts."""
    return "".join(p.text for p in parts if p.text is not None and not p.thought)


def function_calls_of(parts: Iterable[Part]) -> tuple[FunctionCall, ...]:
    return tuple(p.function_call for p in parts if p.function_call is not None)


def function_responses_of(parts: Iterable[Part]) -> tuple[FunctionResponse, ...]:
    return tuple(p.function_response for p in parts if p.function_response is not None)


GENERATED_CALL_ID_PREFIX: Final = "phloem-call-"
"""Prefix of call ids phloem invents; providers that issued no id never see them."""


def fill_call_ids(parts: Iterable[Part]) -> tuple[Part, ...]:
    """Give every function call a unique id without reordering anything: a missing id, or
    a repeat of an earlier one, becomes `phloem-call-<n>` (n = the call's position,
    bumped with a suffix until unique). Deterministic for the same input."""
    parts = tuple(parts)
    taken = {p.function_call.id for p in parts if p.function_call and p.function_call.id}
    seen: set[str] = set()
    out: list[Part] = []
    position = 0
    for part in parts:
        call = part.function_call
        if call is None:
            out.append(part)
            continue
        if call.id and call.id not in seen:
            seen.add(call.id)
            out.append(part)
        else:
            new_id = f"{GENERATED_CALL_ID_PREFIX}{position}"
            suffix = 0
            while new_id in taken or new_id in seen:
                suffix += 1
                new_id = f"{GENERATED_CALL_ID_PREFIX}{position}-{suffix}"
            seen.add(new_id)
            fixed = FunctionCall(name=call.name, args=call.args, id=new_id)
            out.append(msgspec.structs.replace(part, function_call=fixed))
        position += 1
    return tuple(out)


def encode_json(value: msgspec.Struct) -> bytes:
    """JSON bytes for any content type (bytes as base64)."""
    return msgspec.json.encode(value)


def decode_request(data: bytes | str) -> ModelRequest:
    return msgspec.json.decode(data, type=ModelRequest)


def decode_response(data: bytes | str) -> ModelResponse:
    return msgspec.json.decode(data, type=ModelResponse)
