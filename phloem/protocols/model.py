"""The `Model` protocol every provider implements, and `ModelError` with its stable kinds.

A model is anything with `generate(request) -> response` (synchronous; safe to call from
several threads). Streaming is optional: a `StreamingModel` also offers `stream(request)`,
yielding `partial=True` chunks and then one aggregated final response.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final, Literal, Protocol, get_args, runtime_checkable

import msgspec

from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, PhloemError

ProviderProtocol = Literal["gemini", "openai-chat", "openai-responses"]
"""The wire protocols a configured provider (`[providers.NAME] protocol`) speaks."""
PROVIDER_PROTOCOLS: Final[tuple[str, ...]] = get_args(ProviderProtocol)

MODEL_ERROR_KINDS: Final = frozenset(
    {
        # configuration and requests
        ErrorKind.CONFIG_INVALID,
        ErrorKind.INVALID_REQUEST,
        ErrorKind.UNSUPPORTED_CONTENT,
        ErrorKind.UNSUPPORTED_STREAMING,
        ErrorKind.INVALID_TOOL_RESULT,
        # transport and HTTP
        ErrorKind.TRANSPORT,
        ErrorKind.TIMEOUT,
        ErrorKind.REDIRECT_REFUSED,
        ErrorKind.RESPONSE_TOO_LARGE,
        ErrorKind.RATE_LIMITED,
        ErrorKind.AUTHENTICATION,
        ErrorKind.SERVER_ERROR,
        ErrorKind.CLIENT_ERROR,
        # response decoding
        ErrorKind.MALFORMED_RESPONSE,
        ErrorKind.EMPTY_CHOICES,
        ErrorKind.MULTIPLE_CHOICES,
        ErrorKind.MALFORMED_ARGUMENTS,
        ErrorKind.MISSING_FUNCTION_NAME,
        ErrorKind.DUPLICATE_TOOL_CALL_ID,
        ErrorKind.UNSUPPORTED_TOOL_CALL,
        ErrorKind.PROMPT_BLOCKED,
        # the caller's run was cancelled while the call was in flight (phloem.models.cancel)
        ErrorKind.CANCELLED,
        # test doubles
        ErrorKind.SCRIPT_EXHAUSTED,
    }
)
"""Every `kind` a `ModelError` may carry (members of the one `ErrorKind` vocabulary)."""


class ModelError(PhloemError):
    """A failed model call. `kind` is one of `MODEL_ERROR_KINDS`; the message never holds a
    response body, header or credential. `status` is the HTTP status when there was one."""

    def __init__(
        self,
        kind: ErrorKind | str,
        message: str,
        *,
        status: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        kind = ErrorKind(kind)
        if kind not in MODEL_ERROR_KINDS:
            raise ValueError(f"{kind.value!r} is not a model error kind")
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
        ErrorKind.RATE_LIMITED,
        ErrorKind.SERVER_ERROR,
        ErrorKind.TRANSPORT,
        ErrorKind.TIMEOUT,
    }
)


class ResponseTooLarge(ModelError):
    """The response body (counted after decompression) exceeded `max_response_bytes`."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            ErrorKind.RESPONSE_TOO_LARGE,
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
