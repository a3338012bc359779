"""The token estimator (plasmid's): a provider-free, deterministic cost of a request.

The request is written in the provider-neutral wire shape `{model, contents, config}`
(`wire_request`), as canonical JSON: sorted keys, no spaces, no HTML escaping, UTF-8.
`raw = ceil(bytes / 4)`; the overhead adds 4 per content (a system instruction counts as
one), 1 per part, 8 per function call or response, 16 per inline-data part or thought
signature, 12 per function declaration. A calibrated estimate is `ceil(tokens x
factor)`, the factor following what the provider reports (`calibrate`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from phloem.protocols.content import Content, FunctionDeclaration, ModelRequest, Part

PER_CONTENT: Final = 4
PER_PART: Final = 1
PER_FUNCTION: Final = 8
PER_BINARY: Final = 16
PER_DECLARATION: Final = 12
BYTES_PER_TOKEN: Final = 4
CALIBRATION_RANGE: Final = (0.5, 2.0)
CALIBRATION_KEEP: Final = 0.7
"""Weight of the old factor when a model call reports its prompt tokens."""

JSON = Any


def canonical(value: JSON) -> bytes:
    """Canonical JSON: sorted keys, compact separators, UTF-8, no HTML escaping."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(value: JSON) -> str:
    """`sha256:` + the hex digest of the canonical JSON of `value`."""
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


class Estimate(msgspec.Struct, frozen=True, rename="camel"):
    canonical_bytes: int
    raw_tokens: int
    overhead_tokens: int
    tokens: int
    contents: int
    parts: int
    functions: int
    binaries: int
    tool_declarations: int


def _parts_cost(parts: Iterable[Mapping[str, Any]]) -> tuple[int, int, int]:
    count = functions = binaries = 0
    for part in parts:
        count += 1
        if "functionCall" in part or "functionResponse" in part:
            functions += 1
        if "inlineData" in part or "thoughtSignature" in part:
            binaries += 1
    return count, functions, binaries


def estimate(request: Mapping[str, Any]) -> Estimate:
    """The estimate of a wire-shape request `{model?, contents, config?}`."""
    data = canonical(dict(request))
    contents: Sequence[Mapping[str, Any]] = request.get("contents") or []
    config: Mapping[str, Any] = request.get("config") or {}
    n_contents = len(contents)
    parts = functions = binaries = 0
    for content in contents:
        p, f, b = _parts_cost(content.get("parts") or [])
        parts, functions, binaries = parts + p, functions + f, binaries + b
    system = config.get("systemInstruction")
    if system:
        n_contents += 1
        p, f, b = _parts_cost(system.get("parts") or [])
        parts, functions, binaries = parts + p, functions + f, binaries + b
    declarations = sum(len(t.get("functionDeclarations") or []) for t in config.get("tools") or [])
    raw = math.ceil(len(data) / BYTES_PER_TOKEN)
    overhead = (
        PER_CONTENT * n_contents
        + PER_PART * parts
        + PER_FUNCTION * functions
        + PER_BINARY * binaries
        + PER_DECLARATION * declarations
    )
    return Estimate(
        canonical_bytes=len(data),
        raw_tokens=raw,
        overhead_tokens=overhead,
        tokens=raw + overhead,
        contents=n_contents,
        parts=parts,
        functions=functions,
        binaries=binaries,
        tool_declarations=declarations,
    )


def calibrated(tokens: int, factor: float) -> int:
    return math.ceil(tokens * factor)


def calibrate(factor: float, prompt_tokens: int, estimated_tokens: int) -> float:
    """The next factor after a call whose prompt the provider counted as `prompt_tokens`
    and we estimated (uncalibrated) at `estimated_tokens`."""
    if prompt_tokens <= 0 or estimated_tokens <= 0:
        return factor
    low, high = CALIBRATION_RANGE
    value = CALIBRATION_KEEP * factor + (1 - CALIBRATION_KEEP) * (prompt_tokens / estimated_tokens)
    return min(high, max(low, value))


# --- phloem's content model in the wire shape -------------------------------------------


def wire_part(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if part.text is not None:
        out["text"] = part.text
        if part.thought:
            out["thought"] = True
    if part.thought_signature is not None:
        out["thoughtSignature"] = base64.b64encode(part.thought_signature).decode()
    if part.function_call is not None:
        call = part.function_call
        body: dict[str, Any] = {"name": call.name}
        if call.args:
            body["args"] = dict(call.args)
        if call.id:
            body["id"] = call.id
        out["functionCall"] = body
    if part.function_response is not None:
        response = part.function_response
        body = {"name": response.name, "response": response.response}
        if response.id:
            body["id"] = response.id
        out["functionResponse"] = body
    if part.inline_data is not None:
        blob = part.inline_data
        out["inlineData"] = {
            "mimeType": blob.mime_type,
            "data": base64.b64encode(blob.data).decode(),
        }
    return out


def wire_content(content: Content) -> dict[str, Any]:
    return {"role": content.role, "parts": [wire_part(p) for p in content.parts]}


def wire_declaration(declaration: FunctionDeclaration) -> dict[str, Any]:
    return msgspec.to_builtins(declaration)  # type: ignore[no-any-return]


def wire_config(request: ModelRequest) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if request.system_instruction:
        config["systemInstruction"] = {
            "parts": [{"text": request.system_instruction}],
            "role": "user",
        }
    if request.tools:
        config["tools"] = [{"functionDeclarations": [wire_declaration(t) for t in request.tools]}]
    return config


def wire_request(request: ModelRequest, model: str = "") -> dict[str, Any]:
    """`request` in the wire shape the estimator reads."""
    out: dict[str, Any] = {"contents": [wire_content(c) for c in request.contents]}
    config = wire_config(request)
    if config:
        out["config"] = config
    if model:
        out["model"] = model
    return out


def content_from_wire(value: dict[str, Any]) -> Content:
    """The inverse of `wire_content` (for contents a policy kept or changed)."""
    from phloem.protocols.content import Blob, FunctionCall, FunctionResponse

    parts = []
    for raw in value.get("parts") or []:
        signature = raw.get("thoughtSignature")
        sig = base64.b64decode(signature) if signature else None
        if "functionCall" in raw:
            call = raw["functionCall"]
            part = Part(
                function_call=FunctionCall(
                    name=call["name"], args=dict(call.get("args") or {}), id=call.get("id")
                ),
                thought_signature=sig,
            )
        elif "functionResponse" in raw:
            response = raw["functionResponse"]
            part = Part(
                function_response=FunctionResponse(
                    name=response["name"], response=response["response"], id=response.get("id")
                ),
                thought_signature=sig,
            )
        elif "inlineData" in raw:
            blob = raw["inlineData"]
            part = Part(
                inline_data=Blob(mime_type=blob["mimeType"], data=base64.b64decode(blob["data"])),
                thought_signature=sig,
            )
        else:
            part = Part(text=raw["text"], thought=bool(raw.get("thought")), thought_signature=sig)
        parts.append(part)
    return Content(role=value["role"], parts=tuple(parts))
