"""OpenAI Chat Completions wire codec (non-streaming), also spoken by vLLM, llama.cpp, Ollama.

History is sent in order: system, then user / assistant (text and `tool_calls`) / `tool`
messages. Call ids are resolved deterministically (see `resolve_history`); blank arguments
become `{}`; anything else that is not a JSON object fails closed with
`malformed_arguments` — unless the caller asks for recovery, in which case the call's
arguments become `{INVALID_ARGUMENTS_KEY: reason}` so a runner can answer the model
without invoking the tool.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from phloem.protocols.content import (
    GENERATED_CALL_ID_PREFIX,
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

ChatTokenLimit = Literal["max_tokens", "max_completion_tokens"]
CHAT_TOKEN_LIMITS: Final = ("max_tokens", "max_completion_tokens")
INVALID_ARGUMENTS_KEY: Final = "__phloem_invalid_arguments__"
"""Marks a recovered call whose arguments were not a JSON object (see module docstring)."""

_THINK_RE: Final = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}


# -- history ------------------------------------------------------------------------


@dataclass
class UserTurn:
    parts: list[Part]


@dataclass
class AssistantTurn:
    text: str
    calls: list[tuple[str, FunctionCall]] = field(default_factory=list)
    """(wire id, call) in order."""


@dataclass
class ToolResult:
    call_id: str
    name: str
    output: str
    """The function response, JSON-encoded."""


HistoryItem = UserTurn | AssistantTurn | ToolResult


def _unsupported(message: str) -> ModelError:
    return ModelError(ErrorKind.UNSUPPORTED_CONTENT, message)


def encode_tool_output(response: dict[str, Any], name: str) -> str:
    try:
        return msgspec.json.encode(response).decode("utf-8")
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        raise ModelError(
            ErrorKind.INVALID_TOOL_RESULT,
            f"result of tool {name!r} cannot be encoded as JSON",
        ) from None


def resolve_history(
    contents: Sequence[Content], *, raw_results: bool = True
) -> Iterator[HistoryItem]:
    """Walk the history in order, giving every call a unique wire id and pairing every
    function response with its call.

    A call without an id, or repeating an id used earlier in the history, gets
    `phloem-call-<n>` (n counts calls in the history). A response is paired with the
    earliest unanswered call carrying its id (its original or replacement id), or, when
    it has no id, the earliest unanswered call of the same name. A response for a call
    that was already answered is `duplicate_tool_call_id`; one that matches nothing is
    `invalid_tool_result`, and so is a raw result (`RawToolResult`) without `raw_results`
    (the Responses protocol: it would have to rewrite it).
    """
    used: set[str] = set()
    pending: list[tuple[str | None, str, str]] = []  # (original id, wire id, name)
    answered: set[str] = set()
    counter = 0
    for ci, content in enumerate(contents):
        if content.role == "model":
            texts: list[str] = []
            calls: list[tuple[str, FunctionCall]] = []
            for part in content.parts:
                if part.function_call is not None:
                    call = part.function_call
                    wire = call.id
                    if not wire or wire in used:
                        wire = f"{GENERATED_CALL_ID_PREFIX}{counter}"
                        while wire in used:
                            wire += "x"
                    counter += 1
                    used.add(wire)
                    pending.append((call.id, wire, call.name))
                    calls.append((wire, call))
                elif part.text is not None:
                    if not part.thought:
                        texts.append(part.text)
                else:
                    raise _unsupported(
                        f"contents[{ci}]: model content may hold only text and function calls"
                    )
            yield AssistantTurn(text="".join(texts), calls=calls)
            continue
        user_parts: list[Part] = []
        for part in content.parts:
            if part.function_response is None:
                if part.function_call is not None:
                    raise _unsupported(f"contents[{ci}]: user content cannot hold a function call")
                user_parts.append(part)
                continue
            if user_parts:
                yield UserTurn(user_parts)
                user_parts = []
            resp = part.function_response
            match = _pair(pending, resp.id, resp.name)
            if match is None:
                if resp.id is not None and resp.id in answered:
                    raise ModelError(
                        ErrorKind.DUPLICATE_TOOL_CALL_ID,
                        f"contents[{ci}]: a second result for call id {resp.id!r}",
                    )
                raise ModelError(
                    ErrorKind.INVALID_TOOL_RESULT,
                    f"contents[{ci}]: result for tool {resp.name!r} matches no earlier call",
                )
            original, wire, name = pending.pop(match)
            answered.add(wire)
            if original:
                answered.add(original)
            if resp.raw is not None:
                if not raw_results:
                    raise ModelError(
                        ErrorKind.INVALID_TOOL_RESULT,
                        f"contents[{ci}]: the raw result of tool {resp.name!r} can be sent "
                        "only by the openai-chat protocol",
                    )
                yield ToolResult(wire, name, resp.raw)  # prevalidated JSON, verbatim
                continue
            yield ToolResult(wire, name, encode_tool_output(resp.response, resp.name))
        if user_parts:
            yield UserTurn(user_parts)


def _pair(pending: list[tuple[str | None, str, str]], rid: str | None, name: str) -> int | None:
    for i, (original, wire, call_name) in enumerate(pending):
        if rid is not None and rid in (original, wire):
            return i
        if rid is None and call_name == name:
            return i
    return None


def data_url(part: Part) -> str:
    assert part.inline_data is not None
    data = base64.b64encode(part.inline_data.data).decode("ascii")
    return f"data:{part.inline_data.mime_type};base64,{data}"


# -- request ------------------------------------------------------------------------


def _user_message(parts: list[Part]) -> dict[str, Any]:
    if all(p.text is not None for p in parts) and len(parts) == 1:
        return {"role": "user", "content": parts[0].text}
    items: list[dict[str, Any]] = []
    for part in parts:
        if part.text is not None:
            items.append({"type": "text", "text": part.text})
        elif part.inline_data is not None and part.inline_data.mime_type.startswith("image/"):
            items.append({"type": "image_url", "image_url": {"url": data_url(part)}})
        else:
            raise _unsupported("chat completions accept only text and image parts from the user")
    return {"role": "user", "content": items}


def encode_request(
    request: ModelRequest, *, model: str, token_limit: ChatTokenLimit
) -> dict[str, Any]:
    """The JSON body for `POST {base_url}/chat/completions`."""
    messages: list[dict[str, Any]] = []
    if request.system_instruction:
        messages.append({"role": "system", "content": request.system_instruction})
    for item in resolve_history(request.contents):
        if isinstance(item, UserTurn):
            messages.append(_user_message(item.parts))
        elif isinstance(item, AssistantTurn):
            msg: dict[str, Any] = {"role": "assistant", "content": item.text or None}
            if item.calls:
                msg["tool_calls"] = [
                    {
                        "id": wire,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": msgspec.json.encode(call.args).decode("utf-8"),
                        },
                    }
                    for wire, call in item.calls
                ]
            elif not item.text:
                msg["content"] = ""
            messages.append(msg)
        else:
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
    cfg = request.config
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters or {"type": "object", "properties": {}},
                },
            }
            for t in request.tools
        ]
        if cfg.forced_function is not None:
            body["tool_choice"] = {"type": "function", "function": {"name": cfg.forced_function}}
        else:
            body["tool_choice"] = cfg.tool_choice
    if cfg.max_output_tokens is not None:
        body[token_limit] = cfg.max_output_tokens
    if cfg.temperature is not None:
        body["temperature"] = cfg.temperature
    if cfg.top_p is not None:
        body["top_p"] = cfg.top_p
    if cfg.stop_sequences:
        body["stop"] = list(cfg.stop_sequences)
    return body


# -- response -----------------------------------------------------------------------


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(msgspec.Struct):
    id: str | None = None
    type: str | None = None
    function: _Function | None = None


class _Message(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None
    refusal: str | None = None
    reasoning_content: str | None = None


class _Choice(msgspec.Struct):
    message: _Message | None = None
    finish_reason: str | None = None


class _CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    completion_tokens_details: _CompletionDetails | None = None
    prompt_tokens_details: _PromptDetails | None = None


class _Response(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    choices: list[_Choice] | None = None
    usage: _Usage | None = None


def parse_arguments(name: str, text: str | None, *, recover: bool = False) -> dict[str, Any]:
    """Arguments of a call: blank → {}; a JSON object → itself; anything else (malformed,
    trailing data, null, array, scalar) → `malformed_arguments`, or the recovery marker."""
    if text is None or not text.strip():
        return {}
    reason = None
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        reason = "arguments are not valid JSON"
    else:
        if isinstance(value, dict):
            return value
        reason = "arguments are not a JSON object"
    if recover:
        return {INVALID_ARGUMENTS_KEY: reason}
    raise ModelError(ErrorKind.MALFORMED_ARGUMENTS, f"call of {name!r}: {reason}")


def split_think(text: str) -> tuple[str | None, str]:
    """Split a leading `<think>…</think>` block off `text` (reasoning, rest)."""
    match = _THINK_RE.match(text)
    if match is None:
        return None, text
    return match.group(1), text[match.end() :]


def usage_of(u: _Usage | None) -> Usage | None:
    if u is None:
        return None
    details = u.completion_tokens_details
    prompt = u.prompt_tokens_details
    return Usage(
        input_tokens=u.prompt_tokens,
        output_tokens=u.completion_tokens,
        thoughts_tokens=(details.reasoning_tokens or 0) if details else 0,
        cached_tokens=(prompt.cached_tokens or 0) if prompt else 0,
        total_tokens=u.total_tokens,
    )


def decode_response(data: bytes | Any, *, recover_arguments: bool = False) -> ModelResponse:
    """Decode a chat completion into a `ModelResponse`."""
    try:
        if isinstance(data, bytes | str):
            raw = msgspec.json.decode(data, type=_Response)
        else:
            raw = msgspec.convert(data, _Response)
    except msgspec.ValidationError as exc:
        raise ModelError(
            ErrorKind.MALFORMED_RESPONSE,
            f"malformed chat completion at {validation_path(exc)}",
        ) from None
    except msgspec.DecodeError:
        raise ModelError(
            ErrorKind.MALFORMED_RESPONSE, "chat completion is not valid JSON"
        ) from None
    if not raw.choices:
        raise ModelError(ErrorKind.EMPTY_CHOICES, "chat completion has no choices")
    if len(raw.choices) > 1:
        raise ModelError(
            ErrorKind.MULTIPLE_CHOICES,
            f"chat completion has {len(raw.choices)} choices; phloem asks for one",
        )
    choice = raw.choices[0]
    message = choice.message
    if message is None:
        raise ModelError(
            ErrorKind.MALFORMED_RESPONSE, "malformed chat completion at $.choices[0].message"
        )
    parts: list[Part] = []
    if message.reasoning_content:
        parts.append(Part.from_thought(message.reasoning_content))
    finish = _FINISH.get(choice.finish_reason, "OTHER") if choice.finish_reason else None
    if message.content:
        thought, text = split_think(message.content)
        if thought is not None and thought.strip():
            parts.append(Part.from_thought(thought))
        if text:
            parts.append(Part.from_text(text))
    elif message.refusal:
        parts.append(Part.from_text(message.refusal))
        finish = "SAFETY"
    for i, tc in enumerate(message.tool_calls or ()):
        if tc.type not in (None, "function"):
            raise ModelError(
                ErrorKind.UNSUPPORTED_TOOL_CALL,
                f"tool call {i} has unsupported type {_short(tc.type)}",
            )
        if tc.function is None or not tc.function.name:
            raise ModelError(ErrorKind.MISSING_FUNCTION_NAME, f"tool call {i} has no function name")
        args = parse_arguments(tc.function.name, tc.function.arguments, recover=recover_arguments)
        parts.append(
            Part(function_call=FunctionCall(name=tc.function.name, args=args, id=tc.id or None))
        )
    return ModelResponse(
        content=Content(role="model", parts=fill_call_ids(parts)),
        finish_reason=finish,
        usage=usage_of(raw.usage),
        model_version=raw.model,
        response_id=raw.id,
    )


def _short(value: str | None) -> str:
    """A provider-supplied identifier, quoted only if it looks like one."""
    if value is not None and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,40}", value):
        return repr(value)
    return "(unprintable)"
