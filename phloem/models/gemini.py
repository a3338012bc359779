"""`GeminiModel`: Gemini's REST API (`generateContent`, and SSE `streamGenerateContent`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from phloem.models.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_TIMEOUT,
    HttpTransport,
    RetryPolicy,
    check_api_key,
    check_base_url,
)
from phloem.protocols import gemini as wire
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind
from phloem.protocols.model import ModelError

if TYPE_CHECKING:
    import httpx

MODEL_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_model_name(model: str) -> str:
    """A model id safe to put in a URL path (`models/` prefix allowed and dropped)."""
    name = model.removeprefix("models/") if isinstance(model, str) else ""
    if not MODEL_NAME_RE.match(name):
        raise ModelError(
            ErrorKind.CONFIG_INVALID,
            "model must be 1-128 letters, digits, '.', '_' or '-'",
            details={"field": "model"},
        )
    return name


class GeminiModel:
    """A Gemini model over REST. Thread-safe; `close()` releases a client it created."""

    provider_name = "gcp.gemini"  # GenAI semantic conventions: gen_ai.provider.name
    operation_name = "generate_content"  # gen_ai.operation.name of a call

    def __init__(
        self,
        model: str = wire.DEFAULT_MODEL,
        api_key: str = "",
        *,
        base_url: str = wire.DEFAULT_BASE_URL,
        http: httpx.Client | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        timeout: float = DEFAULT_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = check_model_name(model)
        check_api_key(api_key)
        self.base_url = check_base_url(base_url)
        self._api_key = api_key
        self._transport = HttpTransport(
            provider="gemini",
            http=http,
            max_response_bytes=max_response_bytes,
            retry=RetryPolicy(max_retries=max_retries, max_retry_after=max_retry_after),
            timeout=timeout,
            secrets=(api_key,),
            sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"<GeminiModel {self.model!r} at {self.base_url}>"

    def close(self) -> None:
        self._transport.close()

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key} if self._api_key else {}

    def generate(self, request: ModelRequest) -> ModelResponse:
        url = f"{self.base_url}/models/{self.model}:generateContent"
        obj = self._transport.post_json(url, self._headers(), wire.encode_request(request))
        _raise_embedded_error(obj)
        return wire.decode_response(obj)

    def stream(self, request: ModelRequest) -> Iterator[ModelResponse]:
        """Yield partial chunks as they arrive, then the aggregated final response."""
        url = f"{self.base_url}/models/{self.model}:streamGenerateContent?alt=sse"
        aggregator = wire.StreamAggregator()
        events = self._transport.post_sse(url, self._headers(), wire.encode_request(request))
        for event in events:
            if event is None:
                continue
            _raise_embedded_error(event)
            chunk = wire.decode_response(event, partial=True)
            aggregator.add(chunk)
            yield chunk
        yield aggregator.result()


def _raise_embedded_error(obj: object) -> None:
    """A 200 answer (or stream event) that carries `{"error": ...}` instead of content."""
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        status = obj["error"].get("status")
        code = status if isinstance(status, str) and status.isupper() and len(status) < 64 else ""
        raise ModelError(
            ErrorKind.SERVER_ERROR,
            "gemini reported an error" + (f" ({code})" if code else ""),
        )
