"""The Live transport over TLS against a local CA (seed 002's open "local CA TLS
WebSocket lifecycle harness"): a session to a server whose certificate chains to a
trusted CA opens, turns and closes; an untrusted certificate, or one for another host,
fails the connection (`connect_failed`) without leaking the key."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.settings import LiveConfig
from phloem.config import Config
from tests.actors.live.conftest import KEY_ENV, TEST_KEY, collect_until, next_kind

pytestmark = pytest.mark.timeout(90)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool,
    ip: str | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, signer = (subject, key) if issuer is None else issuer
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ip is not None:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))])
        builder = builder.add_extension(san, critical=False)
    return builder.sign(signer, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _server_context(tmp: Path, ip: str) -> tuple[ssl.SSLContext, Path]:
    """A server context whose certificate (for `ip`) a fresh local CA signed; the CA file."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("phloem test CA", ca_key, None, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert("fake live", key, ("phloem test CA", ca_key), ca=False, ip=ip)
    (tmp / "ca.pem").write_bytes(_pem(ca))
    (tmp / "leaf.pem").write_bytes(_pem(leaf))
    (tmp / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp / "leaf.pem", tmp / "key.pem")
    return context, tmp / "ca.pem"


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[FakeLiveServer, Path]]:
    context, ca_file = _server_context(tmp_path, "127.0.0.1")
    with FakeLiveServer(tls=context) as server:
        yield server, ca_file


def _tree(server: FakeLiveServer) -> phloem.Tree:
    live = LiveConfig(api_key_env=KEY_ENV, base_url=server.url, first_subscriber_wait_s=5.0)
    return phloem.Tree.start(msgspec.structs.replace(Config(), live=live))


TEXT = {"response_modalities": ["TEXT"]}


def test_a_session_over_tls_to_a_trusted_local_ca_opens_turns_and_closes(
    tls_server: tuple[FakeLiveServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, ca_file = tls_server
    assert server.url.startswith("wss://127.0.0.1:")
    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # the local CA is the trust store
    with _tree(server) as tree, tree.client() as client:
        ref = client.live_open(TEXT)
        events = client.live_events(ref, phloem.CreditWindow(256, 8 << 20))
        next_kind(events, "ready")
        client.live_send(ref, text="over tls")
        turn = collect_until(events, "turn_complete")
        assert any(e.payload.get("text") == "echo: over tls" for e in turn)
        assert server.connection().headers["x-goog-api-key"] == TEST_KEY  # sent encrypted
        client.live_close(ref)
        closed = next_kind(events, "closed")
        assert closed.payload["reason"] == "client_closed"


@pytest.mark.parametrize("trust", ["system", "other_ca"])
def test_an_untrusted_certificate_fails_the_connection_without_leaking(
    trust: str,
    tls_server: tuple[FakeLiveServer, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _ = tls_server
    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    if trust == "other_ca":
        other = tmp_path / "other"
        other.mkdir()
        monkeypatch.setenv("SSL_CERT_FILE", str(_server_context(other, "127.0.0.1")[1]))
    else:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with _tree(server) as tree, tree.client() as client:
        ref = client.live_open(TEXT)
        events = client.live_events(ref, phloem.CreditWindow(256, 8 << 20))
        closed = next_kind(events, "closed")
        assert closed.payload["reason"] == "connect_failed"
        assert "certificate" in closed.payload["detail"].lower()
        assert TEST_KEY not in closed.payload["detail"]
    assert server.connections == []  # no WebSocket was ever accepted


def test_a_certificate_for_another_host_fails_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    context, ca_file = _server_context(tmp_path, "127.0.0.2")  # not the address dialled
    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    with FakeLiveServer(tls=context) as server, _tree(server) as tree, tree.client() as client:
        ref = client.live_open(TEXT)
        events = client.live_events(ref, phloem.CreditWindow(256, 8 << 20))
        closed = next_kind(events, "closed")
        assert closed.payload["reason"] == "connect_failed"
        assert TEST_KEY not in closed.payload["detail"]
