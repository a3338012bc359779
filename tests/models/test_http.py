"""The shared HTTP transport, exercised through real models against a loopback server:
response limits after decompression, redirects, retries, redaction, hostile environment."""

from __future__ import annotations

import gzip
import socket
import zlib
from collections.abc import Iterator

import httpx
import pytest

from phloem.models.gemini import GeminiModel
from phloem.models.http import MAX_MAX_RESPONSE_BYTES, parse_retry_after
from phloem.models.openai import OpenAIModel
from phloem.protocols.content import Content, ModelRequest
from phloem.protocols.model import ModelError, ResponseTooLarge

from .fake_provider import FakeProvider, Reply, chat_body, chat_text, json_reply

pytestmark = pytest.mark.timeout(20)
REQUEST = ModelRequest(contents=(Content.user("hi"),))
KEY = "sk-very-secret-key-123"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


class Waits:
    """Records the waits a model asks for instead of sleeping."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.seen.append(seconds)


def chat(fake: FakeProvider, **kw: object) -> OpenAIModel:
    options: dict[str, object] = {
        "protocol": "chat_completions",
        "model": "m",
        "base_url": fake.base_url + "/v1",
        "chat_token_limit": "max_tokens",
    }
    options.update(kw)
    return OpenAIModel(**options)  # type: ignore[arg-type]


def padded_chat_reply(total: int, *, compress: bool) -> Reply:
    """A valid chat completion whose body is exactly `total` bytes before compression."""
    reply = chat_text("")
    pad = total - len(reply.body)
    body = reply.body[:-1] + b" " * pad + b"}"
    assert len(body) == total
    return Reply(body=body, headers=reply.headers, gzip=compress)


@pytest.mark.parametrize("compress", [False, True])
def test_a_body_of_exactly_the_limit_passes_and_one_byte_more_fails(
    fake: FakeProvider, compress: bool
) -> None:
    limit = 4096
    fake.add(padded_chat_reply(limit, compress=compress))
    fake.add(padded_chat_reply(limit + 1, compress=compress))
    model = chat(fake, max_response_bytes=limit)
    assert model.generate(REQUEST).text == ""
    with pytest.raises(ResponseTooLarge) as info:
        model.generate(REQUEST)
    assert info.value.kind == "response_too_large"
    assert info.value.limit == limit


def test_a_gzip_bomb_stops_at_the_limit_counted_after_decompression(fake: FakeProvider) -> None:
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 128 * 1024
    fake.add(Reply(body=bomb, headers={"content-encoding": "gzip"}))
    model = chat(fake, max_response_bytes=1024 * 1024)
    with pytest.raises(ResponseTooLarge):
        model.generate(REQUEST)
    assert len(fake.requests) == 1  # too large is not retried


def test_deflate_bodies_are_decoded_and_bad_compression_is_malformed(fake: FakeProvider) -> None:
    fake.add(
        Reply(
            body=zlib.compress(chat_text("deflated").body), headers={"content-encoding": "deflate"}
        ),
        Reply(body=b"not gzip at all", headers={"content-encoding": "gzip"}),
        Reply(body=b"{}", headers={"content-encoding": "br"}),
    )
    model = chat(fake)
    assert model.generate(REQUEST).text == "deflated"
    for _ in range(2):
        with pytest.raises(ModelError) as info:
            model.generate(REQUEST)
        assert info.value.kind == "malformed_response"


def test_response_limit_is_validated_at_its_edges() -> None:
    for bad in (0, MAX_MAX_RESPONSE_BYTES + 1):
        with pytest.raises(ModelError) as info:
            GeminiModel("g", max_response_bytes=bad)
        assert info.value.kind == "config_invalid"
        assert info.value.message == "max_response_bytes must be between 1 and 268435456"
    GeminiModel("g", max_response_bytes=1).close()
    GeminiModel("g", max_response_bytes=MAX_MAX_RESPONSE_BYTES).close()


@pytest.mark.parametrize("follow", [False, True])
def test_redirects_are_refused_even_when_the_callers_client_follows_them(
    fake: FakeProvider, follow: bool
) -> None:
    fake.add(Reply(status=302, headers={"location": fake.base_url + "/elsewhere"}), chat_text("x"))
    with httpx.Client(follow_redirects=follow) as client, pytest.raises(ModelError) as info:
        chat(fake, http=client).generate(REQUEST)
    assert info.value.kind == "redirect_refused"
    assert info.value.status == 302
    assert len(fake.requests) == 1


def test_429_then_success_honours_retry_after(fake: FakeProvider) -> None:
    fake.add(
        json_reply({"error": {"message": "slow down"}}, status=429, headers={"retry-after": "2"}),
        chat_text("finally"),
    )
    waits = Waits()
    assert chat(fake, sleep=waits).generate(REQUEST).text == "finally"
    assert waits.seen == [2.0]
    assert len(fake.requests) == 2


def test_retry_after_beyond_the_cap_ends_the_call_at_once(fake: FakeProvider) -> None:
    fake.add(Reply(status=429, headers={"retry-after": "120"}), chat_text("never"))
    waits = Waits()
    with pytest.raises(ModelError) as info:
        chat(fake, sleep=waits, max_retry_after=30).generate(REQUEST)
    assert info.value.kind == "rate_limited"
    assert info.value.details == {"status": 429, "retry_after": 120.0}
    assert waits.seen == []
    assert len(fake.requests) == 1


def test_server_errors_are_retried_up_to_max_retries_with_backoff(fake: FakeProvider) -> None:
    fake.add(Reply(status=503), Reply(status=500), chat_text("third time"))
    waits = Waits()
    assert chat(fake, sleep=waits, max_retries=2).generate(REQUEST).text == "third time"
    assert len(waits.seen) == 2
    assert all(0 <= w <= 1.0 for w in waits.seen)  # full jitter under 0.5 s, then 1 s


def test_no_retries_when_max_retries_is_zero(fake: FakeProvider) -> None:
    fake.add(Reply(status=503), chat_text("unused"))
    with pytest.raises(ModelError) as info:
        chat(fake, max_retries=0, sleep=Waits()).generate(REQUEST)
    assert info.value.kind == "server_error"
    assert fake.unused == 1


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "client_error"),
        (401, "authentication"),
        (403, "authentication"),
        (404, "client_error"),
    ],
)
def test_client_errors_are_not_retried(fake: FakeProvider, status: int, kind: str) -> None:
    fake.add(Reply(status=status), chat_text("unused"))
    waits = Waits()
    with pytest.raises(ModelError) as info:
        chat(fake, sleep=waits).generate(REQUEST)
    assert info.value.kind == kind
    assert waits.seen == []
    assert len(fake.requests) == 1


def test_transport_errors_are_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits = Waits()
    model = OpenAIModel("responses", "m", f"http://127.0.0.1:{port}/v1", max_retries=1, sleep=waits)
    with pytest.raises(ModelError) as info:
        model.generate(REQUEST)
    assert info.value.kind == "transport"
    assert len(waits.seen) == 1


def test_a_stalled_server_is_a_timeout(fake: FakeProvider) -> None:
    fake.add(Reply(delay=5.0, body=b"{}"))
    with pytest.raises(ModelError) as info:
        chat(fake, timeout=0.2, max_retries=0).generate(REQUEST)
    assert info.value.kind == "timeout"


def test_error_bodies_echoing_the_key_never_reach_the_error(fake: FakeProvider) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": KEY}}
    fake.add(
        json_reply(echo, status=401),
        json_reply({"error": {"message": f"bad {KEY}", "code": "invalid_api_key"}}, status=400),
    )
    model = chat(fake, api_key=KEY)
    with pytest.raises(ModelError) as info:
        model.generate(REQUEST)
    text = f"{info.value} {info.value.details} {info.value.to_value()}"
    assert KEY not in text
    assert "Incorrect" not in text
    assert info.value.message == "openai chat_completions returned HTTP 401"
    with pytest.raises(ModelError) as info:
        model.generate(REQUEST)
    assert info.value.message == "openai chat_completions returned HTTP 400 (invalid_api_key)"
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_gemini_errors_carry_only_the_status_code_word(fake: FakeProvider) -> None:
    body = {
        "error": {"code": 400, "message": f"API key not valid: {KEY}", "status": "INVALID_ARGUMENT"}
    }
    fake.add(json_reply(body, status=400))
    with pytest.raises(ModelError) as info:
        GeminiModel("g", KEY, base_url=fake.base_url).generate(REQUEST)
    assert info.value.message == "gemini returned HTTP 400 (INVALID_ARGUMENT)"
    assert KEY not in repr(info.value.to_value())


def test_hostile_openai_and_proxy_environment_changes_nothing(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-hostile")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/hostile")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-hostile")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-hostile")
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "7")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    fake.add(Reply(status=500), chat_text("clean"))
    model = chat(fake, api_key="", max_retries=0)
    with pytest.raises(ModelError) as info:
        model.generate(REQUEST)
    assert info.value.message == "openai chat_completions returned HTTP 500"
    assert model.generate(REQUEST).text == "clean"
    for sent in fake.requests:
        assert sent.path == "/v1/chat/completions"
        assert "authorization" not in sent.headers
        assert not any(h.startswith("openai-") for h in sent.headers)


def test_retry_after_parses_seconds_and_http_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    assert parse_retry_after(None) is None


def test_body_limit_applies_to_error_bodies_too(fake: FakeProvider) -> None:
    fake.add(json_reply(chat_body("x" * 100_000), status=400))
    with pytest.raises(ModelError) as info:
        chat(fake).generate(REQUEST)
    assert info.value.kind == "client_error"
    assert info.value.message == "openai chat_completions returned HTTP 400"


def test_a_server_dripping_its_body_is_stopped_at_the_timeout(fake: FakeProvider) -> None:
    reply = chat_text("slow " * 40)
    fake.add(Reply(body=reply.body, headers=reply.headers, drip=0.05))
    with pytest.raises(ModelError) as info:
        chat(fake, timeout=0.3, max_retries=0).generate(REQUEST)
    assert info.value.kind == "timeout"
    assert info.value.message == "openai chat_completions response took longer than 0.3 s"


@pytest.mark.parametrize("bad", ["sk-ключ", "sk key", "sk-\nInjected: 1", "sk\t"])
def test_api_keys_that_cannot_travel_in_a_header_are_refused_without_echo(bad: str) -> None:
    for build in (
        lambda: GeminiModel("g", bad),
        lambda: OpenAIModel("responses", "m", "https://h/v1", bad),
    ):
        with pytest.raises(ModelError) as info:
            build()
        assert info.value.kind == "config_invalid"
        assert info.value.message == "api_key must be visible ASCII without spaces"


def test_timeout_and_retry_after_caps_are_validated_at_their_edges() -> None:
    for name, good, bad in (
        ("timeout", (0.001, 600), (0, 600.5)),
        ("max_retry_after", (0, 300), (-1, 301)),
    ):
        for value in good:
            GeminiModel("g", **{name: value}).close()  # type: ignore[arg-type]
        for value in bad:
            with pytest.raises(ModelError) as info:
                GeminiModel("g", **{name: value})  # type: ignore[arg-type]
            assert info.value.kind == "config_invalid"
            assert info.value.message.startswith(f"{name} must be between")
