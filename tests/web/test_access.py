"""The access rule: listen addresses, loopback, the token, the per-request refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from phloem.config import WebConfig, load_config
from phloem.protocols.errors import PhloemError
from phloem.web.access import MAX_TOKEN_CHARS, MIN_TOKEN_CHARS, Access, is_loopback, parse_listen

TOKEN = "s3cret-" + "t" * 20


def test_listen_addresses_parse_with_their_port_range() -> None:
    assert parse_listen("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen("localhost:65535") == ("localhost", 65_535)
    for bad in ("127.0.0.1:65536", "127.0.0.1", ":80", "host:http"):
        with pytest.raises(PhloemError) as err:
            parse_listen(bad)
        assert err.value.kind == "config_invalid"
    with pytest.raises(PhloemError, match="between 0 and 65535"):
        parse_listen("127.0.0.1:65536")


def test_loopback_is_this_machine_only() -> None:
    for host in ("127.0.0.1", "127.8.9.10", "::1", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "example.com", "127.0.0.1.nip.io"):
        assert not is_loopback(host), host


def test_a_loopback_server_checks_the_host_name() -> None:
    access = Access.for_listen("127.0.0.1", "UNSET_TOKEN_VAR")
    assert access.refusal("127.0.0.1:8765", "", None) == 0
    assert access.refusal("localhost:8765", "", None) == 0
    assert access.refusal("[::1]:8765", "", None) == 0
    assert access.refusal("evil.example:8765", "", None) == 403  # DNS rebinding
    assert access.refusal("", "", None) == 403


def test_another_address_needs_a_token_of_bounded_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PHLOEM_WEB_TOKEN", raising=False)
    with pytest.raises(PhloemError, match=r"not loopback: set a token in \$PHLOEM_WEB_TOKEN"):
        Access.for_listen("0.0.0.0", "PHLOEM_WEB_TOKEN")
    for length, ok in (
        (MIN_TOKEN_CHARS - 1, False),
        (MIN_TOKEN_CHARS, True),
        (MAX_TOKEN_CHARS, True),
        (MAX_TOKEN_CHARS + 1, False),
    ):
        monkeypatch.setenv("PHLOEM_WEB_TOKEN", "x" * length)
        if ok:
            assert Access.for_listen("0.0.0.0", "PHLOEM_WEB_TOKEN").token == "x" * length
        else:
            with pytest.raises(PhloemError, match="must be 16 to 4096 characters"):
                Access.for_listen("0.0.0.0", "PHLOEM_WEB_TOKEN")


def test_every_request_to_another_address_carries_the_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PHLOEM_WEB_TOKEN", TOKEN)
    access = Access.for_listen("192.0.2.7", "PHLOEM_WEB_TOKEN")
    assert access.refusal("192.0.2.7:8765", "", None) == 401
    assert access.refusal("127.0.0.1:8765", "", None) == 401  # loopback peers too
    assert access.refusal("x", f"Bearer {TOKEN}", None) == 0
    assert access.refusal("x", f"bearer {TOKEN}", None) == 0
    assert access.refusal("x", f"Bearer {TOKEN}x", None) == 401
    assert access.refusal("x", f"Basic {TOKEN}", None) == 401
    assert access.refusal("x", "", TOKEN) == 0
    assert access.refusal("x", "", TOKEN[:-1]) == 401
    assert access.refusal("x", "Bearer " + "y" * (MAX_TOKEN_CHARS + 1), None) == 401


def test_the_web_section_is_off_by_default_and_bounded(tmp_short: Path) -> None:
    assert WebConfig().listen == ""
    path = tmp_short / "phloem.toml"
    path.write_text('[web]\nlisten = "127.0.0.1:8765"\nrefresh_ms = 50\nclient_queue = 1\n')
    assert load_config(path).web.listen == "127.0.0.1:8765"
    for bad in ('listen = "no port"', "refresh_ms = 49", "client_queue = 0", "max_clients = 1025"):
        path.write_text(f"[web]\n{bad}\n")
        with pytest.raises(PhloemError) as err:
            load_config(path)
        assert err.value.kind == "config_invalid" and "web." in str(err.value)
