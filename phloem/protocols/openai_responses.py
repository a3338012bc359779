"""OpenAI Responses API wire codec (non-streaming, `store: false`).

History becomes `input` items in order: user/assistant messages, `function_call` and
`function_call_output` items (call ids resolved exactly as for Chat, see
`openai_chat.resolve_history`). Output `message`, `function_call` and `reasoning` items map
to text, call and thought parts; any other output item is `unsupported_tool_call`.
Thought parts are not sent back (without server-side storage they cannot be replayed).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from phloem.protocols.content import (
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
from phloem.protocols.openai_chat import (
    AssistantTurn,
    UserTurn,
    data_url,
    parse_arguments,
    resolve_history,
)

_INCOMPLETE: Final[dict[str, FinishReason]] = {
    "max_output_tokens": "MAX_TOKENS",
    "content_filter": "SAFETY",
}


def _user_item(parts: list[Part]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in parts:
        if part.text is not None:
            content.append({"type": "input_text", "text": part.text})
        elif part.inline_data is not None and part.inline_data.mime_type.startswith("image/"):
            content.append({"type": "input_image", "image_url": data_url(part)})
        else:
            raise ModelError(
                ErrorKind.UNSUPPORTED_CONTENT,
                "the responses protocol accepts only text and image parts from the user",
            )
    return {"type": "message", "role": "user", "content": content}


def encode_request(request: ModelRequest, *, model: str) -> dict[str, Any]:
    """The JSON body for `POST {base_url}/responses`."""
    items: list[dict[str, Any]] = []
    for item in resolve_history(request.contents, raw_results=False):
        if isinstance(item, UserTurn):
            items.append(_user_item(item.parts))
        elif isinstance(item, AssistantTurn):
            if item.text:
                items.append({"type": "message", "role": "assistant", "content": item.text})
            for wire, call in item.calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": wire,
                        "name": call.name,
                        "arguments": msgspec.json.encode(call.args).decode("utf-8"),
                    }
                )
        else:
            items.append(
                {"type": "function_call_output", "call_id": item.call_id, "output": item.output}
            )
    body: dict[str, Any] = {"model": model, "input": items, "store": False}
    if request.system_instruction:
        body["instructions"] = request.system_instruction
    cfg = request.config
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters or {"type": "object", "properties": {}},
                "strict": False,
            }
            for t in request.tools
        ]
        if cfg.forced_function is not None:
            body["tool_choice"] = {"type": "function", "name": cfg.forced_function}
        else:
            body["tool_choice"] = cfg.tool_choice
    if cfg.max_output_tokens is not None:
        body["max_output_tokens"] = cfg.max_output_tokens
    if cfg.temperature is not None:
        body["temperature"] = cfg.temperature
    if cfg.top_p is not None:
        body["top_p"] = cfg.top_p
    if cfg.stop_sequences:
        raise ModelError(ErrorKind.INVALID_REQUEST, "stop_sequences are not supported by responses")
    thinking = cfg.thinking_config
    if thinking is not None and thinking.include_thoughts:
        body["reasoning"] = {"summary": "auto"}
    return body


class _ContentItem(msgspec.Struct):
    type: str
    text: str | None = None
    refusal: str | None = None


class _Summary(msgspec.Struct):
    text: str = ""


class _OutputItem(msgspec.Struct):
    type: str
    content: list[_ContentItem] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    summary: list[_Summary] | None = None


class _Incomplete(msgspec.Struct):
    reason: str | None = None


class _ErrorInfo(msgspec.Struct):
    code: str | None = None


class _OutputDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class _InputDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    output_tokens_details: _OutputDetails | None = None
    input_tokens_details: _InputDetails | None = None


class _Response(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    status: str | None = None
    output: list[_OutputItem] = []
    incomplete_details: _Incomplete | None = None
    error: _ErrorInfo | None = None
    usage: _Usage | None = None


def _usage(u: _Usage | None) -> Usage | None:
    if u is None:
        return None
    out, inp = u.output_tokens_details, u.input_tokens_details
    return Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        thoughts_tokens=(out.reasoning_tokens or 0) if out else 0,
        cached_tokens=(inp.cached_tokens or 0) if inp else 0,
        total_tokens=u.total_tokens,
    )


def decode_response(data: bytes | Any, *, recover_arguments: bool = False) -> ModelResponse:
    """Decode a Responses API answer into a `ModelResponse`."""
    try:
        if isinstance(data, bytes | str):
            raw = msgspec.json.decode(data, type=_Response)
        else:
            raw = msgspec.convert(data, _Response)
    except msgspec.ValidationError as exc:
        raise ModelError(
            ErrorKind.MALFORMED_RESPONSE, f"malformed response at {validation_path(exc)}"
        ) from None
    except msgspec.DecodeError:
        raise ModelError(ErrorKind.MALFORMED_RESPONSE, "response is not valid JSON") from None
    if raw.status == "failed":
        code = raw.error.code if raw.error and raw.error.code else None
        safe = code if code and code.replace("_", "").isalnum() and len(code) <= 64 else None
        raise ModelError(
            ErrorKind.SERVER_ERROR,
            "response failed" + (f" ({safe})" if safe else ""),
        )
    finish: FinishReason = "STOP"
    if raw.status == "incomplete":
        reason = raw.incomplete_details.reason if raw.incomplete_details else None
        finish = _INCOMPLETE.get(reason or "", "OTHER")
    parts: list[Part] = []
    for i, item in enumerate(raw.output):
        if item.type == "message":
            for c in item.content or ():
                if c.type == "output_text" and c.text is not None:
                    parts.append(Part.from_text(c.text))
                elif c.type == "refusal" and c.refusal is not None:
                    parts.append(Part.from_text(c.refusal))
                    finish = "SAFETY"
                else:
                    raise ModelError(
                        ErrorKind.UNSUPPORTED_CONTENT,
                        f"output[{i}] holds an unsupported content item",
                    )
        elif item.type == "function_call":
            if not item.name:
                raise ModelError(ErrorKind.MISSING_FUNCTION_NAME, f"output[{i}] call has no name")
            args = parse_arguments(item.name, item.arguments, recover=recover_arguments)
            parts.append(
                Part(function_call=FunctionCall(name=item.name, args=args, id=item.call_id))
            )
        elif item.type == "reasoning":
            text = "\n".join(s.text for s in item.summary or () if s.text)
            if text:
                parts.append(Part.from_thought(text))
        else:
            raise ModelError(
                ErrorKind.UNSUPPORTED_TOOL_CALL,
                f"output[{i}] is an output item phloem does not support",
            )
    return ModelResponse(
        content=Content(role="model", parts=fill_call_ids(parts)),
        finish_reason=finish,
        usage=_usage(raw.usage),
        model_version=raw.model,
        response_id=raw.id,
    )
