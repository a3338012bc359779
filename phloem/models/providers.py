"""Model providers declared by name in the configuration (`[providers.NAME]`).

```toml
[providers.flash]
protocol = "gemini"                    # gemini | openai-chat | openai-responses
model = "gemini-3.1-flash-lite"
api_key_env = "PHLOEM_GEMINI_API_KEY"  # the key itself never goes in the file

[providers.local]
protocol = "openai-chat"
model = "qwen3:8b"
base_url = "http://127.0.0.1:11434/v1"
chat_token_limit = "max_tokens"
```

`build_model(config)` reads the key from the named environment variable at that moment;
nothing else is taken from the environment.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Final, Literal

import msgspec

from phloem.base.settings import read_toml
from phloem.models.gemini import GeminiModel
from phloem.models.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_TIMEOUT,
    MAX_MAX_RESPONSE_BYTES,
    MAX_MAX_RETRIES,
    MAX_MAX_RETRY_AFTER,
    MAX_TIMEOUT,
    check_base_url,
)
from phloem.models.openai import OpenAIModel
from phloem.protocols import gemini as gemini_wire
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.model import (
    Model,
    ModelError,
    ProviderProtocol,
    StreamingModel,
    validation_path,
)

DEFAULT_OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
ENV_NAME_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
PROVIDER_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ProviderConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One `[providers.NAME]` table."""

    protocol: ProviderProtocol  # the wire protocol the endpoint speaks
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]  # the provider's name for it
    base_url: str = ""
    """Empty: the provider's public endpoint."""
    api_key_env: Annotated[str, msgspec.Meta(pattern=ENV_NAME_PATTERN)] | None = None
    """Name of the environment variable holding the API key; unset/None sends no key."""
    # Largest response body, counted after decompression; past it, `response_too_large`.
    max_response_bytes: Annotated[int, msgspec.Meta(ge=1, le=MAX_MAX_RESPONSE_BYTES)] = (
        DEFAULT_MAX_RESPONSE_BYTES
    )
    # Retries after the first attempt, on 429, 5xx, transport errors and timeouts only.
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=MAX_MAX_RETRIES)] = DEFAULT_MAX_RETRIES
    # Longest `Retry-After` waited for; a longer one ends the call at once.
    max_retry_after_s: Annotated[float, msgspec.Meta(ge=0, le=MAX_MAX_RETRY_AFTER)] = (
        DEFAULT_MAX_RETRY_AFTER
    )
    # Time an HTTP attempt has to connect, for each read and for its body; then `timeout`.
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)] = DEFAULT_TIMEOUT
    # The request field that carries the output token limit; required by openai-chat
    # (servers differ), not allowed with the other protocols.
    chat_token_limit: Literal["max_tokens", "max_completion_tokens"] | None = None

    def __post_init__(self) -> None:
        if self.base_url:
            try:
                check_base_url(self.base_url)
            except ModelError as exc:
                raise ValueError(exc.message) from None
        if self.protocol == "openai-chat" and self.chat_token_limit is None:
            raise ValueError("chat_token_limit is required for openai-chat")
        if self.protocol != "openai-chat" and self.chat_token_limit is not None:
            raise ValueError("chat_token_limit applies only to openai-chat")

    def resolved_base_url(self) -> str:
        if self.base_url:
            return self.base_url
        return (
            gemini_wire.DEFAULT_BASE_URL if self.protocol == "gemini" else DEFAULT_OPENAI_BASE_URL
        )


def _invalid(message: str) -> ModelError:
    return ModelError(ErrorKind.CONFIG_INVALID, message)


def decode_providers(table: Any, source: str = "providers") -> dict[str, ProviderConfig]:
    """Decode the `providers` table (name → settings); errors name `providers.NAME.field`."""
    if not isinstance(table, dict):
        raise _invalid(f"{source} must be a table")
    out: dict[str, ProviderConfig] = {}
    for name, value in table.items():
        if not PROVIDER_NAME_RE.match(str(name)):
            raise _invalid(f"{source}.{name}: provider names are 1-64 letters, digits, . _ -")
        try:
            out[name] = msgspec.convert(value, ProviderConfig)
        except msgspec.ValidationError as exc:
            path = validation_path(exc).removeprefix("$").lstrip(".")
            detail = str(exc).split(" - at ")[0]
            if detail.startswith("Object contains unknown field"):
                field = detail.split("`")[1]
                raise _invalid(f"{source}.{name}.{field}: unknown key") from None
            where = f"{source}.{name}" + (f".{path}" if path else "")
            raise _invalid(f"{where}: {detail[:1].lower() + detail[1:]}") from None
    return out


def load_providers(path: str | os.PathLike[str]) -> dict[str, ProviderConfig]:
    """The providers declared in a TOML config file (other sections are ignored here)."""
    data, _ = read_toml(path)
    return decode_providers(data.get("providers", {}))


def api_key_for(config: ProviderConfig, environ: Mapping[str, str] | None = None) -> str:
    """The key from the configured environment variable ('' when none is configured)."""
    if not config.api_key_env:
        return ""
    env = os.environ if environ is None else environ
    key = env.get(config.api_key_env, "")
    if not key:
        raise _invalid(f"environment variable {config.api_key_env} (api_key_env) is not set")
    return key


def build_model(
    config: ProviderConfig, environ: Mapping[str, str] | None = None
) -> GeminiModel | OpenAIModel:
    """A ready model for a provider config, with its key read from the environment."""
    key = api_key_for(config, environ)
    base_url = config.resolved_base_url()
    if config.protocol == "gemini":
        return GeminiModel(
            config.model,
            key,
            base_url=base_url,
            max_response_bytes=config.max_response_bytes,
            max_retries=config.max_retries,
            max_retry_after=config.max_retry_after_s,
            timeout=config.timeout_s,
        )
    return OpenAIModel(
        "chat_completions" if config.protocol == "openai-chat" else "responses",
        config.model,
        base_url,
        key,
        max_response_bytes=config.max_response_bytes,
        max_retries=config.max_retries,
        max_retry_after=config.max_retry_after_s,
        timeout=config.timeout_s,
        chat_token_limit=config.chat_token_limit,
    )


class ProviderRegistry:
    """Models for configured providers by name, built on first use and shared (models are
    thread-safe). Unknown names are `unknown_provider`; only configured names resolve."""

    def __init__(
        self,
        providers: Mapping[str, ProviderConfig],
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._configs = dict(providers)
        self._environ = environ
        self._models: dict[str, GeminiModel | OpenAIModel] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted(self._configs)

    def config(self, name: str) -> ProviderConfig:
        try:
            return self._configs[name]
        except KeyError:
            raise PhloemError(
                ErrorKind.UNKNOWN_PROVIDER, f"no provider named {name!r} is configured"
            ) from None

    def describe(self, name: str) -> dict[str, str]:
        """What provider `name`'s model is, from its config alone (nothing is built, no
        key is read): `provider_name`, `operation_name` and `model`, as its model class
        names them for telemetry, and `missing_key_env`: the variable its key is read from
        when the environment does not set it ("" when it is set or none is configured),
        so a caller can name it before any call."""
        config = self.config(name)
        cls = GeminiModel if config.protocol == "gemini" else OpenAIModel
        env = os.environ if self._environ is None else self._environ
        missing = (
            config.api_key_env if config.api_key_env and not env.get(config.api_key_env) else ""
        )
        return {
            "provider_name": cls.provider_name,
            "operation_name": cls.operation_name,
            "model": config.model,
            "missing_key_env": missing,
        }

    def get(self, name: str) -> GeminiModel | OpenAIModel:
        config = self.config(name)
        with self._lock:
            model = self._models.get(name)
            if model is None:
                model = build_model(config, self._environ)
                self._models[name] = model
            return model

    def rows(self) -> list[dict[str, str | None]]:
        """`provider_rows` of the configured providers, keys checked in this registry's
        environment (a daemon's: what its model calls will see)."""
        return provider_rows(self._configs, self._environ)

    def close(self) -> None:
        with self._lock:
            models, self._models = list(self._models.values()), {}
        for model in models:
            model.close()


class ProviderModel:
    """A configured provider's model, resolved at its first call (so a missing API key
    fails that call — `model_failed` — rather than the daemon's start)."""

    def __init__(
        self,
        provider: str,
        resolve: Callable[[str], Model],
        describe: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        self.provider = provider
        self._resolve = resolve
        self._describe_provider = describe

    def generate(self, request: ModelRequest) -> ModelResponse:
        return self._resolve(self.provider).generate(request)

    def _describe(self, attribute: str) -> str:
        """What the provider's config says of its model (telemetry's GenAI attributes),
        without resolving it; "" for a provider that is not configured."""
        if self._describe_provider is None:
            return ""
        try:
            return self._describe_provider(self.provider).get(attribute, "")
        except Exception:
            return ""

    @property
    def provider_name(self) -> str:
        return self._describe("provider_name")

    @property
    def operation_name(self) -> str:
        return self._describe("operation_name")

    @property
    def model(self) -> str:
        return self._describe("model")

    @property
    def missing_key_env(self) -> str:
        """The variable the provider's API key is read from, when it is not set ("" when it
        is, or the provider needs none): a caller can name it before the first call."""
        return self._describe("missing_key_env")

    def stream(self, request: ModelRequest) -> Iterator[ModelResponse]:
        """The provider's stream (`unsupported_streaming` where it has none)."""
        model = self._resolve(self.provider)
        if not isinstance(model, StreamingModel):
            raise ModelError(ErrorKind.UNSUPPORTED_STREAMING, f"{self.provider} does not stream")
        return model.stream(request)

    def __repr__(self) -> str:
        return f"<ProviderModel {self.provider!r}>"


def provider_rows(
    providers: Mapping[str, ProviderConfig], environ: Mapping[str, str] | None = None
) -> list[dict[str, str | None]]:
    """What `phloem model list` shows of each provider: never a key, only whether its
    variable is `set`, `missing` (named but unset) or `none` (no key configured)."""
    rows: list[dict[str, str | None]] = []
    for name, cfg in providers.items():
        try:
            key_state = "set" if api_key_for(cfg, environ) else "none"
        except PhloemError:
            key_state = "missing"
        rows.append(
            {
                "name": name,
                "protocol": cfg.protocol,
                "model": cfg.model,
                "base_url": cfg.resolved_base_url(),
                "api_key_env": cfg.api_key_env,
                "api_key": key_state,
            }
        )
    return rows
