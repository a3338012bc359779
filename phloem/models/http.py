"""HTTP transport shared by the providers: bounded bodies, no redirects, careful retries.

- Bodies are read raw and decompressed here, so `max_response_bytes` counts bytes *after*
  gzip/deflate decompression and a gzip bomb stops at the limit instead of filling memory.
- Redirects are refused (`redirect_refused`), whatever the caller's client is set to do.
- Retries happen only on 429, 5xx and transport errors, with exponential backoff; a
  `Retry-After` header is honoured, and one longer than `max_retry_after` ends the call at once.
- Error messages never contain a response body, a header or the API key: only the provider
  name, the HTTP status and, when it looks like one, the provider's short error code.
- A client we create ourselves has `trust_env=False`: proxy, certificate and `OPENAI_*`
  environment variables change nothing. Its connections obey the caller's cancel scope
  (`phloem.models.cancel`): a cancelled run's call in flight ends with `cancelled`.
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import random
import re
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.models import cancel
from phloem.protocols.errors import ErrorKind
from phloem.protocols.limits import RangeError, RangeTypeError, check_range, format_number
from phloem.protocols.model import ModelError, ResponseTooLarge
from phloem.protocols.secrets import redact
from phloem.protocols.sse import SseDecoder

if TYPE_CHECKING:  # httpx (with httpcore, h11 and what its CLI pulls in) loads with the
    import httpx  # first transport or URL check: a daemon that calls no model never pays

log = get_logger(__name__)

DEFAULT_MAX_RESPONSE_BYTES: Final = 8 * 1024 * 1024
MIN_MAX_RESPONSE_BYTES: Final = 1
MAX_MAX_RESPONSE_BYTES: Final = 256 * 1024 * 1024
DEFAULT_MAX_RETRIES: Final = 2
MAX_MAX_RETRIES: Final = 10
DEFAULT_TIMEOUT: Final = 120.0
MAX_TIMEOUT: Final = 600.0
DEFAULT_INITIAL_BACKOFF: Final = 0.5
DEFAULT_MAX_BACKOFF: Final = 8.0
DEFAULT_MAX_RETRY_AFTER: Final = 30.0
MAX_MAX_RETRY_AFTER: Final = 300.0

_CODE_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,63}$")


@contextlib.contextmanager
def _as_config_invalid() -> Iterator[None]:
    """Range errors of provider settings (`limits.check_range`) become `ModelError`s of
    kind `config_invalid`, with the same message and details."""
    try:
        yield
    except (RangeError, RangeTypeError) as exc:
        raise ModelError(ErrorKind.CONFIG_INVALID, exc.message, details=exc.details) from None


def check_base_url(base_url: str) -> str:
    """Validate an endpoint: http(s), a host, no userinfo, no query or fragment.
    Returns it without a trailing slash."""
    import httpx

    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ModelError(ErrorKind.CONFIG_INVALID, "base_url is not a valid URL") from exc
    if url.scheme not in ("http", "https"):
        raise ModelError(ErrorKind.CONFIG_INVALID, "base_url must use http or https")
    if not url.host:
        raise ModelError(ErrorKind.CONFIG_INVALID, "base_url must have a host")
    if url.userinfo:
        raise ModelError(ErrorKind.CONFIG_INVALID, "base_url must not contain userinfo")
    if url.query or url.fragment:
        raise ModelError(ErrorKind.CONFIG_INVALID, "base_url must not have a query or fragment")
    return base_url.rstrip("/")


def check_api_key(api_key: object) -> str:
    """An API key must be a string of visible ASCII (it travels in a header). The message
    never repeats the key."""
    if not isinstance(api_key, str):
        raise ModelError(ErrorKind.CONFIG_INVALID, "api_key must be a string")
    if api_key and not (api_key.isascii() and api_key.isprintable() and " " not in api_key):
        raise ModelError(
            ErrorKind.CONFIG_INVALID,
            "api_key must be visible ASCII without spaces",
            details={"field": "api_key"},
        )
    return api_key


class RetryPolicy(msgspec.Struct, frozen=True):
    """How a provider retries: attempts after the first, backoff, and the longest
    `Retry-After` it will wait. `sleep` is replaceable so tests need not wait."""

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_backoff: float = DEFAULT_INITIAL_BACKOFF
    max_backoff: float = DEFAULT_MAX_BACKOFF
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER

    def validate(self) -> None:
        with _as_config_invalid():
            check_range("max_retries", self.max_retries, 0, MAX_MAX_RETRIES)
            check_range("initial_backoff", self.initial_backoff, 0, 60, integer=False)
            check_range("max_backoff", self.max_backoff, 0, 300, integer=False)
            check_range(
                "max_retry_after", self.max_retry_after, 0, MAX_MAX_RETRY_AFTER, integer=False
            )

    def backoff(self, attempt: int) -> float:
        """Full-jitter exponential backoff for retry number `attempt` (0-based)."""
        ceiling = min(self.max_backoff, self.initial_backoff * (2**attempt))
        return random.uniform(0, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta seconds or an HTTP date); None if absent
    or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


class HttpTransport:
    """POSTs JSON to one provider and returns decoded JSON (or SSE events)."""

    def __init__(
        self,
        *,
        provider: str,
        http: httpx.Client | None,
        max_response_bytes: int,
        retry: RetryPolicy,
        timeout: float,
        secrets: tuple[str, ...] = (),
        sleep: Callable[[float], None] = cancel.sleep,
    ) -> None:
        import httpx

        from phloem.models.cancel_transport import cancellable_transport

        with _as_config_invalid():
            check_range(
                "max_response_bytes",
                max_response_bytes,
                MIN_MAX_RESPONSE_BYTES,
                MAX_MAX_RESPONSE_BYTES,
            )
            check_range("timeout", timeout, 0.001, MAX_TIMEOUT, integer=False)
        retry.validate()
        self.provider = provider
        self.max_response_bytes = max_response_bytes
        self.retry = retry
        self.timeout = timeout
        self._secrets = tuple(s for s in secrets if s)
        self._sleep = sleep
        self._owns_client = http is None
        self._client = (
            http
            if http is not None
            else httpx.Client(
                timeout=timeout,
                trust_env=False,
                follow_redirects=False,
                transport=cancellable_transport(),
            )
        )

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    # -- public calls ---------------------------------------------------------------

    def post_json(self, url: str, headers: Mapping[str, str], body: Any) -> Any:
        """POST `body` as JSON; return the decoded JSON answer, retrying as the policy says."""
        data = self._call(url, headers, body)
        try:
            return msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise ModelError(
                ErrorKind.MALFORMED_RESPONSE, f"{self.provider} answered with invalid JSON"
            ) from exc

    def post_sse(self, url: str, headers: Mapping[str, str], body: Any) -> Iterator[Any]:
        """POST `body` and yield each SSE `data:` payload decoded as JSON (None for a
        `[DONE]` marker). Retries apply only before the first event has been yielded."""
        import httpx

        payload = msgspec.json.encode(body)
        all_headers = self._headers(headers, sse=True)
        attempt = 0
        while True:
            started = False
            try:
                with self._client.stream(
                    "POST", url, content=payload, headers=all_headers, follow_redirects=False
                ) as resp:
                    self._check_status(resp)
                    for event in self._sse_events(resp):
                        started = True
                        yield event
                    return
            except ModelError as exc:
                if started or not self._should_retry(exc, attempt):
                    raise
            except httpx.HTTPError as exc:
                err = self._transport_error(exc)
                if started or not self._should_retry(err, attempt):
                    raise err from None
            attempt += 1

    # -- internals ------------------------------------------------------------------

    def _headers(self, headers: Mapping[str, str], *, sse: bool = False) -> dict[str, str]:
        out = {
            "content-type": "application/json",
            "accept": "text/event-stream" if sse else "application/json",
            "accept-encoding": "gzip, deflate",
            "user-agent": "phloem",
        }
        out.update(telemetry.headers())  # W3C traceparent of the current (model call) span
        out.update(headers)
        return out

    def _call(
        self,
        url: str,
        headers: Mapping[str, str],
        body: Any,
    ) -> bytes:
        import httpx

        payload = msgspec.json.encode(body)
        all_headers = self._headers(headers)
        attempt = 0
        while True:
            try:
                with self._client.stream(
                    "POST", url, content=payload, headers=all_headers, follow_redirects=False
                ) as resp:
                    self._check_status(resp)
                    return self._read_all(resp)
            except ModelError as exc:
                if not self._should_retry(exc, attempt):
                    raise
            except httpx.HTTPError as exc:
                err = self._transport_error(exc)
                if not self._should_retry(err, attempt):
                    raise err from None
            attempt += 1

    def _should_retry(self, exc: ModelError, attempt: int) -> bool:
        if not exc.retryable or attempt >= self.retry.max_retries or cancel.cancelled():
            return False
        retry_after = (exc.details or {}).get("retry_after")
        if isinstance(retry_after, float):
            if retry_after > self.retry.max_retry_after:
                return False
            wait = retry_after
        else:
            wait = self.retry.backoff(attempt)
        log.info(
            "model_retry",
            provider=self.provider,
            kind=exc.kind,
            attempt=attempt + 1,
            wait=round(wait, 3),
        )
        self._sleep(wait)
        return True

    def _transport_error(self, exc: httpx.HTTPError) -> ModelError:
        import httpx

        if cancel.cancelled():  # our own transport gave up on a cancelled call
            return cancel.cancelled_error(self.provider)
        if isinstance(exc, httpx.TimeoutException):
            return ModelError(ErrorKind.TIMEOUT, f"{self.provider} request timed out")
        if isinstance(exc, httpx.TransportError):
            return ModelError(
                ErrorKind.TRANSPORT,
                f"{self.provider} request failed: {type(exc).__name__}",
            )
        return ModelError(
            ErrorKind.TRANSPORT, f"{self.provider} request failed: {type(exc).__name__}"
        )

    def _check_status(self, resp: httpx.Response) -> None:
        status = resp.status_code
        if 200 <= status < 300:
            return
        if 300 <= status < 400:
            raise ModelError(
                ErrorKind.REDIRECT_REFUSED,
                f"{self.provider} answered with a redirect (HTTP {status}); redirects are refused",
                status=status,
            )
        code = self._error_code(resp)
        suffix = f" ({code})" if code else ""
        details: dict[str, Any] = {}
        if status == 429:
            kind = ErrorKind.RATE_LIMITED
            retry_after = parse_retry_after(resp.headers.get("retry-after"))
            if retry_after is not None:
                details["retry_after"] = retry_after
        elif status >= 500:
            kind = ErrorKind.SERVER_ERROR
            retry_after = parse_retry_after(resp.headers.get("retry-after"))
            if retry_after is not None:
                details["retry_after"] = retry_after
        elif status in (401, 403):
            kind = ErrorKind.AUTHENTICATION
        elif status == 408:
            kind = ErrorKind.TIMEOUT
        else:
            kind = ErrorKind.CLIENT_ERROR
        if code:
            details["code"] = code
        raise ModelError(
            kind,
            self.redact(f"{self.provider} returned HTTP {status}{suffix}"),
            status=status,
            details=details or None,
        )

    def _error_code(self, resp: httpx.Response) -> str | None:
        """The provider's short machine code from an error body (never its message)."""
        import httpx

        try:
            obj = msgspec.json.decode(self._read_all(resp, limit=64 * 1024))
        except (ModelError, msgspec.DecodeError, httpx.HTTPError):
            return None
        err = obj.get("error") if isinstance(obj, dict) else None
        if not isinstance(err, dict):
            return None
        for key in ("status", "code", "type"):
            value = err.get(key)
            if isinstance(value, str) and _CODE_RE.match(value) and not self._is_secret(value):
                return value
        return None

    def _is_secret(self, text: str) -> bool:
        return any(s in text or text in s for s in self._secrets)

    def redact(self, text: str) -> str:
        """`text` without this provider's secrets (and anything credential-shaped)."""
        return redact(text, self._secrets)

    def _decoder(self, resp: httpx.Response) -> Any:
        encoding = resp.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            return None
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            return zlib.decompressobj()
        raise ModelError(
            ErrorKind.MALFORMED_RESPONSE,
            f"{self.provider} used an unsupported content-encoding",
        )

    def _iter_decoded(self, resp: httpx.Response, limit: int) -> Iterator[bytes]:
        """Yield decompressed body bytes; raise ResponseTooLarge past `limit` bytes, and
        `timeout` when the whole body takes longer than `timeout` seconds (httpx's own
        timeout bounds each read, so a server dripping bytes is stopped here)."""
        decoder = self._decoder(resp)
        total = 0
        deadline = time.monotonic() + self.timeout
        try:
            # as the network delivers it: SSE events are never held back for a full buffer
            for raw in resp.iter_raw():
                if time.monotonic() > deadline:
                    took = f"took longer than {format_number(self.timeout)} s"
                    raise ModelError(ErrorKind.TIMEOUT, f"{self.provider} response {took}")
                if decoder is None:
                    chunk = raw
                    total += len(chunk)
                    if total > limit:
                        raise ResponseTooLarge(limit)
                    yield chunk
                    continue
                pending = raw
                while pending:
                    chunk = decoder.decompress(pending, limit - total + 1)
                    pending = decoder.unconsumed_tail
                    total += len(chunk)
                    if total > limit:
                        raise ResponseTooLarge(limit)
                    if chunk:
                        yield chunk
                    if decoder.eof:
                        break
            if decoder is not None:
                tail = decoder.flush()
                total += len(tail)
                if total > limit:
                    raise ResponseTooLarge(limit)
                if tail:
                    yield tail
        except zlib.error as exc:
            raise ModelError(
                ErrorKind.MALFORMED_RESPONSE,
                f"{self.provider} sent a body that does not decompress",
            ) from exc

    def _read_all(self, resp: httpx.Response, limit: int | None = None) -> bytes:
        return b"".join(self._iter_decoded(resp, limit or self.max_response_bytes))

    def _sse_events(self, resp: httpx.Response) -> Iterator[Any]:
        decoder = SseDecoder()
        for chunk in self._iter_decoded(resp, self.max_response_bytes):
            for data in decoder.feed(chunk):
                yield self._decode_event(data)
        for data in decoder.close():
            yield self._decode_event(data)

    def _decode_event(self, data: bytes) -> Any:
        if data.strip() == b"[DONE]":
            return None
        try:
            return msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise ModelError(
                ErrorKind.MALFORMED_RESPONSE,
                f"{self.provider} sent a stream event that is not JSON",
            ) from exc
