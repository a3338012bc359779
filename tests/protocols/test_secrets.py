"""The one secret rule (`is_secret_key`) and the one redaction built on it (`redact`)."""

from __future__ import annotations

import json

import pytest

from phloem.protocols.secrets import (
    KEY_CLASS_CACHE_CHARS,
    MAX_MESSAGE_CHARS,
    REDACTED,
    is_secret_key,
    redact,
    redact_value,
)

SECRET = "s3cr3tVALUE_abcdefgh"

LEAKY = [
    f"Authorization: Bearer {SECRET}",
    f"authorization: bearer {SECRET}",
    f"Authorization: Basic {SECRET}==",
    f"Proxy-Authorization: Basic {SECRET}",
    f"headers={{'Authorization': 'Bearer {SECRET}'}}",
    f'{{"Authorization": "Bearer {SECRET}"}}',
    f"sent Bearer {SECRET} upstream",
    f"sent Basic dXNlcjpwYXNz{SECRET} upstream",
    f"{{'api_key': '{SECRET}'}}",
    f'{{"api_key": "{SECRET}"}}',
    f'{{"api_key":"{SECRET}","model":"m"}}',
    f'{{"token": "{SECRET}"}}',
    f"{{'password': '{SECRET}', 'user': 'u'}}",
    f"api_key='{SECRET}'",
    f'api_key="{SECRET} with spaces"',
    f"api_key={SECRET}",
    f"API-KEY: {SECRET}",
    f"x-api-key: {SECRET}",
    f"client_secret={SECRET}&grant_type=x",
    f"https://api.example/v1?key=1&access_token={SECRET}&x=1",
    f"postgres://admin:{SECRET}@db.example:5432/app",
    f"refresh_token: {SECRET}",
    f"session_id={SECRET}",
    f"{{'auth': {{'user': 'u', 'pin': '{SECRET}'}}}}",
    f'{{"auth": ["{SECRET}", "x"]}}',
    f"sk-{SECRET}{SECRET}",
    f"RuntimeError: upstream said {{'token': '{SECRET}'}} (retry)",
    f"passwd:{SECRET}",
    f"{{\\'api_key\\': \\'{SECRET}\\'}}",  # an escaped repr inside a repr
]


@pytest.mark.parametrize("text", LEAKY)
def test_credentials_in_every_common_shape_are_redacted(text: str) -> None:
    out = redact(text)
    assert SECRET not in out, out
    assert REDACTED in out, out


def test_long_key_names_are_classed_as_short_ones_are() -> None:
    # names past KEY_CLASS_CACHE_CHARS are classed anew each time, by the same rule
    long = "x" * (KEY_CLASS_CACHE_CHARS + 10)
    assert is_secret_key(f"{long}_password") and is_secret_key(f"{long}_token", "t")
    assert not is_secret_key(f"{long}_input_tokens", 5) and not is_secret_key(long)
    assert is_secret_key("password") and not is_secret_key("input_tokens", 5)


@pytest.mark.parametrize(
    "key",
    [
        "sk-proj0123456789abcdefABCDEF",
        "AIzaSyA0123456789abcdefghijklmnopq",
        "ghp_0123456789abcdefghijABCDEFGHIJ",
        "xoxb-0123456789-abcdefghij",
        "AKIA0123456789ABCDEF",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl",
    ],
)
def test_a_key_shape_alone_in_plain_words_is_redacted(key: str) -> None:
    # no key, separator or scheme beside it: only its shape gives it away
    out = redact(f"the upstream rejected {key} today")
    assert key not in out and out == f"the upstream rejected {REDACTED} today", out


@pytest.mark.parametrize(
    "text",
    [
        "Basic authentication failed for user bob",
        "Bearer tokens are described in RFC 6750",
        "max_tokens=100, input_tokens: 5",
        '{"usage": {"output_tokens": 17, "total_tokens": 20}}',
        "the tokenizer ran out of budget",
        "status=404 path=/v1/models",
        "key=value",
        "monkey: banana",
        "postgres://db.example:5432/app",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact(text) == text


def test_the_key_and_the_scheme_stay_readable() -> None:
    assert redact(f"Authorization: Bearer {SECRET}") == f"Authorization: Bearer {REDACTED}"
    assert redact(f"{{'api_key': '{SECRET}'}}") == f"{{'api_key': '{REDACTED}'}}"
    assert redact(f'{{"token": "{SECRET}", "n": 1}}') == f'{{"token": "{REDACTED}", "n": 1}}'
    assert redact(f"api_key={SECRET} rest") == f"api_key={REDACTED} rest"


def test_redacted_json_stays_json() -> None:
    doc = json.dumps({"api_key": SECRET, "nested": {"password": SECRET}, "n": [1, 2]})
    out = redact(doc)
    assert SECRET not in out
    assert json.loads(out)["n"] == [1, 2]


def test_explicit_secrets_and_the_length_cap() -> None:
    assert redact("the key is opaque-42", ("opaque-42",)) == f"the key is {REDACTED}"
    long = "x" * (MAX_MESSAGE_CHARS + 10)
    assert len(redact(long)) == MAX_MESSAGE_CHARS + 1
    assert redact(long, limit=None) == long


def test_redaction_is_idempotent() -> None:
    for text in LEAKY:
        once = redact(text)
        assert redact(once) == once


def test_redact_value_prunes_secret_keys_and_redacts_every_string() -> None:
    value = {
        "why": f"Authorization: Bearer {SECRET}",
        "password": SECRET,
        "items": [f"api_key={SECRET}", 3, None],
        "usage": {"total_tokens": 7},
    }
    assert redact_value(value) == {
        "why": f"Authorization: Bearer {REDACTED}",
        "items": [f"api_key={REDACTED}", 3, None],
        "usage": {"total_tokens": 7},
    }


def test_secret_paths_mark_what_redaction_would_hide_as_json_pointers() -> None:
    from phloem.protocols.secrets import secret_paths

    args = {
        "command": "export password=$(touch x)",  # redact would rewrite it
        "env": {"API_KEY": "k", "a/b~c": ["sk-" + "a1" * 16, "fine"], "max_tokens": 5},
        "plain": "ls -la",
        "n": 1,
    }
    assert secret_paths(args) == ["/command", "/env/API_KEY", "/env/a~1b~0c/0"]
    assert secret_paths({"ok": ["x", {"y": 1}]}) == [] and secret_paths("Bearer abcdefgh12") == [""]


def test_secret_paths_name_at_most_max_secret_paths_the_first_in_order() -> None:
    from phloem.protocols.secrets import MAX_SECRET_PATHS, secret_paths

    def keys(n: int) -> dict[str, str]:
        return {f"password_{i:03d}": "x" for i in range(n)}

    assert len(secret_paths(keys(MAX_SECRET_PATHS))) == MAX_SECRET_PATHS
    over = secret_paths(keys(MAX_SECRET_PATHS + 1))
    assert over == [f"/password_{i:03d}" for i in range(MAX_SECRET_PATHS)]


def test_secret_paths_walk_deep_values_without_recursing() -> None:
    from phloem.protocols.secrets import secret_paths

    value: object = {"token": "t"}
    for _ in range(50_000):
        value = [value]
    assert secret_paths(value) == ["/0" * 50_000 + "/token"]
