"""Gemini REST (`generateContent` / `streamGenerateContent?alt=sse`) wire codec.

`encode_request` builds the JSON body from a `ModelRequest`; `decode_response` turns one
`GenerateContentResponse` (a whole answer or one SSE chunk) into a `ModelResponse`, and
`StreamAggregator` folds chunks into the final answer. Ids phloem generated for calls
(prefix `phloem-call-`) are never sent back, since Gemini did not issue them.
"""

from __future__ import annotations

import base64
from typing import Any, Final

import msgspec

from phloem.protocols.content import (
    GENERATED_CALL_ID_PREFIX,
    Blob,
    Content,
    FinishReason,
    FunctionCall,
    ModelRequest,
    ModelResponse,
    Part,
    Usage,
    fill_call_ids,
)
from phloem.protocols.errors import ErrorKind
from phloem.protocols.model import ModelError, validation_path

DEFAULT_BASE_URL: Final = "https://generativelanguage.googleapis.com/v1beta"
DEFAULT_MODEL: Final = "gemini-3.1-flash-lite"

_FINISH: Final[dict[str, FinishReason]] = {
    "STOP": "STOP",
    "MAX_TOKENS": "MAX_TOKENS",
    "SAFETY": "SAFETY",
    "RECITATION": "RECITATION",
    "MALFORMED_FUNCTION_CALL": "MALFORMED_FUNCTION_CALL",
    "BLOCKLIST": "SAFETY",
    "PROHIBITED_CONTENT": "SAFETY",
    "SPII": "SAFETY",
    "IMAGE_SAFETY": "SAFETY",
}


# -- request ------------------------------------------------------------------------


def _encode_part(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if part.text is not None:
        out["text"] = part.text
        if part.thought:
            out["thought"] = True
    elif part.function_call is not None:
        call: dict[str, Any] = {"name": part.function_call.name, "args": part.function_call.args}
        if part.function_call.id and not part.function_call.id.startswith(GENERATED_CALL_ID_PREFIX):
            call["id"] = part.function_call.id
        out["functionCall"] = call
    elif part.function_response is not None:
        if part.function_response.raw is not None:
            raise ModelError(
                ErrorKind.INVALID_TOOL_RESULT,
                f"the raw result of tool {part.function_response.name!r} can be sent only "
                "by the openai-chat protocol (Gemini takes an object)",
            )
        resp: dict[str, Any] = {
            "name": part.function_response.name,
            "response": part.function_response.response,
        }
        rid = part.function_response.id
        if rid and not rid.startswith(GENERATED_CALL_ID_PREFIX):
            resp["id"] = rid
        out["functionResponse"] = resp
    elif part.inline_data is not None:
        out["inlineData"] = {
            "mimeType": part.inline_data.mime_type,
            "data": base64.b64encode(part.inline_data.data).decode("ascii"),
        }
    if part.thought_signature is not None:
        out["thoughtSignature"] = base64.b64encode(part.thought_signature).decode("ascii")
    return out


def encode_request(request: ModelRequest) -> dict[str, Any]:
    """The JSON body for `models/{model}:generateContent`."""
    body: dict[str, Any] = {
        "contents": [
            {"role": c.role, "parts": [_encode_part(p) for p in c.parts]} for c in request.contents
        ]
    }
    if request.system_instruction:
        body["systemInstruction"] = {"parts": [{"text": request.system_instruction}]}
    if request.tools:
        decls = []
        for tool in request.tools:
            decl: dict[str, Any] = {"name": tool.name, "description": tool.description}
            if tool.parameters is not None:
                decl["parametersJsonSchema"] = tool.parameters
            decls.append(decl)
        body["tools"] = [{"functionDeclarations": decls}]
        cfg = request.config
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}[cfg.tool_choice]
        calling: dict[str, Any] = {"mode": mode}
        if cfg.forced_function is not None:
            calling = {"mode": "ANY", "allowedFunctionNames": [cfg.forced_function]}
        body["toolConfig"] = {"functionCallingConfig": calling}
    gen: dict[str, Any] = {}
    cfg = request.config
    if cfg.max_output_tokens is not None:
        gen["maxOutputTokens"] = cfg.max_output_tokens
    if cfg.temperature is not None:
        gen["temperature"] = cfg.temperature
    if cfg.top_p is not None:
        gen["topP"] = cfg.top_p
    if cfg.stop_sequences:
        gen["stopSequences"] = list(cfg.stop_sequences)
    if cfg.thinking_config is not None:
        thinking: dict[str, Any] = {}
        if cfg.thinking_config.include_thoughts is not None:
            thinking["includeThoughts"] = cfg.thinking_config.include_thoughts
        if cfg.thinking_config.thinking_budget is not None:
            thinking["thinkingBudget"] = cfg.thinking_config.thinking_budget
        gen["thinkingConfig"] = thinking
    if gen:
        body["generationConfig"] = gen
    return body


# -- response -----------------------------------------------------------------------


class _FunctionCall(msgspec.Struct):
    name: str = ""
    args: Any = None
    id: str | None = None


class _Blob(msgspec.Struct, rename="camel"):
    mime_type: str
    data: bytes


class _Part(msgspec.Struct, rename="camel"):
    text: str | None = None
    thought: bool | None = None
    thought_signature: bytes | None = None
    function_call: _FunctionCall | None = None
    inline_data: _Blob | None = None


class _Content(msgspec.Struct):
    parts: list[_Part] = []
    role: str | None = None


class _Candidate(msgspec.Struct, rename="camel"):
    content: _Content | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct, rename="camel"):
    prompt_token_count: int = 0
    candidates_token_count: int = 0
    thoughts_token_count: int = 0
    cached_content_token_count: int = 0
    total_token_count: int = 0


class _Feedback(msgspec.Struct, rename="camel"):
    block_reason: str | None = None


class _Response(msgspec.Struct, rename="camel"):
    candidates: list[_Candidate] = []
    usage_metadata: _Usage | None = None
    model_version: str | None = None
    response_id: str | None = None
    prompt_feedback: _Feedback | None = None


_DECODER: Final = msgspec.json.Decoder(_Response)


def _malformed(where: str) -> ModelError:
    return ModelError(ErrorKind.MALFORMED_RESPONSE, f"malformed Gemini response at {where}")


def _decode_part(index: int, part: _Part) -> Part | None:
    signature = part.thought_signature
    if part.function_call is not None:
        call = part.function_call
        if not call.name:
            raise ModelError(
                ErrorKind.MISSING_FUNCTION_NAME,
                f"Gemini function call at part {index} has no name",
            )
        args = {} if call.args is None else call.args
        if not isinstance(args, dict):
            raise ModelError(
                ErrorKind.MALFORMED_ARGUMENTS,
                f"Gemini function call {call.name!r} has arguments that are not an object",
            )
        return Part(
            function_call=FunctionCall(name=call.name, args=args, id=call.id or None),
            thought_signature=signature,
        )
    if part.text is not None:
        return Part(text=part.text, thought=bool(part.thought), thought_signature=signature)
    if part.inline_data is not None:
        return Part(
            inline_data=Blob(mime_type=part.inline_data.mime_type, data=part.inline_data.data),
            thought_signature=signature,
        )
    if signature is not None:
        # A bare signature closes a thinking turn; keep it on an empty text part.
        return Part(text="", thought_signature=signature)
    raise ModelError(
        ErrorKind.UNSUPPORTED_CONTENT,
        f"Gemini response part {index} carries no supported payload",
    )


def usage_of(raw: Any) -> Usage | None:
    if raw is None:
        return None
    u: _Usage = raw
    return Usage(
        input_tokens=u.prompt_token_count,
        output_tokens=u.candidates_token_count,
        thoughts_tokens=u.thoughts_token_count,
        cached_tokens=u.cached_content_token_count,
        total_tokens=u.total_token_count,
    )


def decode_response(data: bytes | Any, *, partial: bool = False) -> ModelResponse:
    """Decode one GenerateContentResponse (raw JSON bytes or an already-decoded object)."""
    try:
        if isinstance(data, bytes | str):
            raw = _DECODER.decode(data)
        else:
            raw = msgspec.convert(data, _Response)
    except msgspec.ValidationError as exc:
        raise _malformed(validation_path(exc)) from None
    except msgspec.DecodeError:
        raise _malformed("$") from None
    usage = usage_of(raw.usage_metadata)
    if not raw.candidates:
        if raw.prompt_feedback is not None and raw.prompt_feedback.block_reason:
            return ModelResponse(
                finish_reason="SAFETY",
                usage=usage,
                model_version=raw.model_version,
                response_id=raw.response_id,
                partial=partial,
            )
        if partial:
            return ModelResponse(usage=usage, model_version=raw.model_version, partial=True)
        raise ModelError(ErrorKind.EMPTY_CHOICES, "Gemini response has no candidates")
    if len(raw.candidates) > 1:
        raise ModelError(
            ErrorKind.MULTIPLE_CHOICES,
            f"Gemini response has {len(raw.candidates)} candidates; phloem asks for one",
        )
    cand = raw.candidates[0]
    content = None
    if cand.content is not None:
        parts = tuple(
            p
            for i, raw_part in enumerate(cand.content.parts)
            if (p := _decode_part(i, raw_part)) is not None
        )
        if not partial:
            parts = fill_call_ids(parts)
        content = Content(role="model", parts=parts)
    finish: FinishReason | None = None
    if cand.finish_reason and cand.finish_reason != "FINISH_REASON_UNSPECIFIED":
        finish = _FINISH.get(cand.finish_reason, "OTHER")
    return ModelResponse(
        content=content,
        finish_reason=finish,
        usage=usage,
        model_version=raw.model_version,
        response_id=raw.response_id,
        partial=partial,
    )


class StreamAggregator:
    """Folds streamed chunks into one answer: adjacent text of the same kind (thought or
    not) is joined, calls and data are kept in order, the last finish reason, usage and
    model version win."""

    def __init__(self) -> None:
        self._parts: list[Part] = []
        self._finish: FinishReason | None = None
        self._usage: Usage | None = None
        self._version: str | None = None
        self._response_id: str | None = None
        self.chunks = 0

    def add(self, chunk: ModelResponse) -> None:
        self.chunks += 1
        for part in chunk.parts:
            last = self._parts[-1] if self._parts else None
            if (
                last is not None
                and part.text is not None
                and last.text is not None
                and last.thought == part.thought
            ):
                self._parts[-1] = Part(
                    text=last.text + part.text,
                    thought=part.thought,
                    thought_signature=part.thought_signature or last.thought_signature,
                )
            else:
                self._parts.append(part)
        self._finish = chunk.finish_reason or self._finish
        self._usage = chunk.usage or self._usage
        self._version = chunk.model_version or self._version
        self._response_id = chunk.response_id or self._response_id

    def result(self) -> ModelResponse:
        parts = fill_call_ids(p for p in self._parts if p.text != "" or p.thought_signature)
        content = Content(role="model", parts=parts) if parts else None
        if content is None and self._finish is None:
            raise ModelError(ErrorKind.EMPTY_CHOICES, "Gemini stream ended without content")
        return ModelResponse(
            content=content,
            finish_reason=self._finish,
            usage=self._usage,
            model_version=self._version,
            response_id=self._response_id,
        )
