"""`OpenAIModel`: OpenAI Responses or Chat Completions (and compatible servers) over httpx.

The configuration is typed and closed (`OpenAIConfig`); the protocol is fixed at
construction and never inferred or switched. An empty api_key sends no Authorization
header. Nothing is read from the environment: `OPENAI_*` variables change nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import msgspec

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
from phloem.protocols import openai_chat, openai_responses
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind
from phloem.protocols.model import ModelError
from phloem.protocols.openai_chat import CHAT_TOKEN_LIMITS, ChatTokenLimit

if TYPE_CHECKING:
    import httpx

OpenAIProtocol = Literal["responses", "chat_completions"]
PROTOCOLS = ("responses", "chat_completions")
MAX_MODEL_NAME = 256


class OpenAIConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything an `OpenAIModel` may be configured with, and nothing else."""

    protocol: str
    model: str
    base_url: str
    api_key: str = ""
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_retries: int = DEFAULT_MAX_RETRIES
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER
    timeout: float = DEFAULT_TIMEOUT
    chat_token_limit: str | None = None

    def validate(self) -> None:
        """Raise `config_invalid` naming the first bad field."""
        if self.protocol not in PROTOCOLS:
            raise ModelError(
                ErrorKind.CONFIG_INVALID,
                "protocol must be responses or chat_completions",
                details={"field": "protocol"},
            )
        if (
            not isinstance(self.model, str)
            or not 1 <= len(self.model) <= MAX_MODEL_NAME
            or not self.model.isprintable()
            or self.model.strip() != self.model
        ):
            raise ModelError(
                ErrorKind.CONFIG_INVALID,
                f"model must be 1-{MAX_MODEL_NAME} printable characters without surrounding spaces",
                details={"field": "model"},
            )
        check_base_url(self.base_url)
        check_api_key(self.api_key)
        if self.protocol == "chat_completions":
            if self.chat_token_limit not in CHAT_TOKEN_LIMITS:
                raise ModelError(
                    ErrorKind.CONFIG_INVALID,
                    "chat_token_limit must be max_tokens or max_completion_tokens",
                    details={"field": "chat_token_limit"},
                )
        elif self.chat_token_limit is not None:
            raise ModelError(
                ErrorKind.CONFIG_INVALID,
                "chat_token_limit applies only to chat_completions",
                details={"field": "chat_token_limit"},
            )


class OpenAIModel:
    """An OpenAI-compatible model. Thread-safe; `close()` releases a client it created."""

    provider_name = "openai"  # GenAI semantic conventions: gen_ai.provider.name
    operation_name = "chat"  # gen_ai.operation.name of a call

    def __init__(
        self,
        protocol: OpenAIProtocol,
        model: str,
        base_url: str,
        api_key: str = "",
        *,
        http: httpx.Client | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        timeout: float = DEFAULT_TIMEOUT,
        chat_token_limit: ChatTokenLimit | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        config = OpenAIConfig(
            protocol=protocol,
            model=model,
            base_url=base_url,
            api_key=api_key,
            max_response_bytes=max_response_bytes,
            max_retries=max_retries,
            max_retry_after=max_retry_after,
            timeout=timeout,
            chat_token_limit=chat_token_limit,
        )
        config.validate()
        self._protocol: OpenAIProtocol = protocol
        self.model = config.model
        self.base_url = check_base_url(base_url)
        self._api_key = api_key
        self._token_limit: ChatTokenLimit = chat_token_limit or "max_completion_tokens"
        self._transport = HttpTransport(
            provider=f"openai {protocol}",
            http=http,
            max_response_bytes=max_response_bytes,
            retry=RetryPolicy(max_retries=max_retries, max_retry_after=max_retry_after),
            timeout=timeout,
            secrets=(api_key,),
            sleep=sleep,
        )

    @classmethod
    def from_config(cls, config: OpenAIConfig, *, http: httpx.Client | None = None) -> OpenAIModel:
        config.validate()
        return cls(
            protocol=config.protocol,  # type: ignore[arg-type]
            model=config.model,
            base_url=config.base_url,
            api_key=config.api_key,
            http=http,
            max_response_bytes=config.max_response_bytes,
            max_retries=config.max_retries,
            max_retry_after=config.max_retry_after,
            timeout=config.timeout,
            chat_token_limit=config.chat_token_limit,  # type: ignore[arg-type]
        )

    @property
    def protocol(self) -> OpenAIProtocol:
        """Fixed at construction: phloem never switches or infers the protocol."""
        return self._protocol

    def __repr__(self) -> str:
        return f"<OpenAIModel {self.protocol} {self.model!r} at {self.base_url}>"

    def close(self) -> None:
        self._transport.close()

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def generate(self, request: ModelRequest, *, recover_arguments: bool = False) -> ModelResponse:
        """One non-streaming call. With `recover_arguments`, a call whose arguments are not
        a JSON object comes back marked (`openai_chat.INVALID_ARGUMENTS_KEY`) instead of
        failing the whole response with `malformed_arguments`."""
        body: dict[str, Any]
        if self.protocol == "chat_completions":
            body = openai_chat.encode_request(
                request, model=self.model, token_limit=self._token_limit
            )
            obj = self._transport.post_json(
                f"{self.base_url}/chat/completions", self._headers(), body
            )
            return openai_chat.decode_response(obj, recover_arguments=recover_arguments)
        body = openai_responses.encode_request(request, model=self.model)
        obj = self._transport.post_json(f"{self.base_url}/responses", self._headers(), body)
        return openai_responses.decode_response(obj, recover_arguments=recover_arguments)

    def stream(self, request: ModelRequest) -> Iterator[ModelResponse]:
        """Streaming is not offered for OpenAI protocols: raises `unsupported_streaming`."""
        raise ModelError(
            ErrorKind.UNSUPPORTED_STREAMING,
            f"openai {self.protocol} supports only non-streaming generation",
        )
