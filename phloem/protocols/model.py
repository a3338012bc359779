"""The `Model` protocol every provider implements, and `ModelError` with its stable kinds.

A model is anything with `generate(request) -> response` (synchronous; safe to call from
several threads). Streaming is optional: a `StreamingModel` also offers `stream(request)`,
yielding `partial=True` chunks and then one aggregated final response.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import StrEnum
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import PhloemError


class ModelErrorKind(StrEnum):
    """Every `kind` a `ModelError` may carry."""

    # configuration and requests
    INVALID_CONFIG = "invalid_config"
    INVALID_REQUEST = "invalid_request"
    UNSUPPORTED_CONTENT = "unsupported_content"
    UNSUPPORTED_STREAMING = "unsupported_streaming"
    INVALID_TOOL_RESULT = "invalid_tool_result"
    # transport and HTTP
    TRANSPORT = "transport"
    TIMEOUT = "timeout"
    REDIRECT_REFUSED = "redirect_refused"
    RESPONSE_TOO_LARGE = "response_too_large"
    RATE_LIMITED = "rate_limited"
    AUTHENTICATION = "authentication"
    SERVER_ERROR = "server_error"
    CLIENT_ERROR = "client_error"
    # response decoding
    MALFORMED_RESPONSE = "malformed_response"
    EMPTY_CHOICES = "empty_choices"
    MULTIPLE_CHOICES = "multiple_choices"
    MALFORMED_ARGUMENTS = "malformed_arguments"
    MISSING_FUNCTION_NAME = "missing_function_name"
    DUPLICATE_TOOL_CALL_ID = "duplicate_tool_call_id"
    UNSUPPORTED_TOOL_CALL = "unsupported_tool_call"
    PROMPT_BLOCKED = "prompt_blocked"
    # test doubles
    SCRIPT_EXHAUSTED = "script_exhausted"


class ModelError(PhloemError):
    """A failed model call. `kind` is a `ModelErrorKind` value; the message never holds a
    response body, header or credential. `status` is the HTTP status when there was one."""

    def __init__(
        self,
        kind: ModelErrorKind | str,
        message: str,
        *,
        status: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        kind = ModelErrorKind(kind)
        merged = dict(details or {})
        if status is not None:
            merged["status"] = status
        super().__init__(kind.value, message, merged or None)
        self.status = status

    @property
    def retryable(self) -> bool:
        """True for failures worth retrying: rate limits, 5xx, transport errors, timeouts."""
        return self.kind in _RETRYABLE


_RETRYABLE = frozenset(
    {
        ModelErrorKind.RATE_LIMITED,
        ModelErrorKind.SERVER_ERROR,
        ModelErrorKind.TRANSPORT,
        ModelErrorKind.TIMEOUT,
    }
)


class ResponseTooLarge(ModelError):
    """The response body (counted after decompression) exceeded `max_response_bytes`."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            ModelErrorKind.RESPONSE_TOO_LARGE,
            f"response exceeded max_response_bytes ({limit} bytes after decompression)",
            details={"limit": limit},
        )
        self.limit = limit


@runtime_checkable
class Model(Protocol):
    """A language model: one request in, one response out."""

    def generate(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream: partial chunks, then the aggregated final response."""

    def stream(self, request: ModelRequest) -> Iterator[ModelResponse]: ...


_PATH_RE: Final = re.compile(r"at `(\$[^`]*)`")


def validation_path(exc: msgspec.ValidationError) -> str:
    """The `$.path` from a msgspec validation error, without any value it may quote
    (provider answers are untrusted, so their values never enter an error message)."""
    match = _PATH_RE.search(str(exc))
    return match.group(1) if match else "$"
