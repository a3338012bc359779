"""`[telemetry]` values at their edges, export headers from the environment, and the W3C
carrier: what is sent over the socket and what a malformed one does (nothing)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import phloem
from phloem.actors.telemetry.settings import MAX_HEADERS, TelemetryConfig
from phloem.base import telemetry
from phloem.config import parse_config
from phloem.protocols.errors import PhloemError
from phloem.protocols.wire import Ask, TraceContext, decode_client, encode_frame

VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def config_error(text: str) -> str:
    with pytest.raises(PhloemError) as info:
        parse_config("[telemetry]\n" + text)
    assert info.value.kind == "config_invalid"
    return info.value.message


def test_defaults_are_off_and_local() -> None:
    cfg = parse_config("").telemetry
    assert cfg.enabled is False and cfg.capture_content is False
    assert cfg.signal_url("traces") == "http://127.0.0.1:4318/v1/traces"
    assert TelemetryConfig(endpoint="https://otel.example/").signal_url("metrics") == (
        "https://otel.example/v1/metrics"
    )


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        ("sample_ratio = 0.0", "sample_ratio = -0.1"),
        ("sample_ratio = 1.0", "sample_ratio = 1.01"),
        ("max_queue_events = 1", "max_queue_events = 0"),
        ("max_queue_bytes = 4096", "max_queue_bytes = 4095"),
        ("batch_size = 4096", "batch_size = 4097"),
        ("max_inflight_batches = 16", "max_inflight_batches = 17"),
        ("max_content_chars = 64", "max_content_chars = 63"),
        ("export_timeout_s = 300", "export_timeout_s = 0"),
        ("drain_timeout_s = 0", "drain_timeout_s = 301"),
    ],
)
def test_limits_have_tested_edges(good: str, bad: str) -> None:
    parse_config("[telemetry]\n" + good)
    assert "telemetry." + bad.split(maxsplit=1)[0] in config_error(bad)


def test_the_endpoint_and_the_headers_variable_are_checked() -> None:
    assert "telemetry.endpoint" in config_error('endpoint = "ftp://collector"')
    assert "telemetry.headers_env" in config_error('headers_env = "not a name"')
    assert "telemetry.nope" in config_error("nope = 1")


def test_headers_come_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = TelemetryConfig(headers_env="PHLOEM_TEST_HEADERS")
    monkeypatch.delenv("PHLOEM_TEST_HEADERS", raising=False)
    assert cfg.headers() == {}
    monkeypatch.setenv("PHLOEM_TEST_HEADERS", "Authorization=Bearer abc, x-a = 1,")
    assert cfg.headers() == {"authorization": "Bearer abc", "x-a": "1"}
    monkeypatch.setenv("PHLOEM_TEST_HEADERS", "x-secret-value")
    with pytest.raises(ValueError) as info:
        cfg.headers()
    assert "x-secret-value" not in str(info.value)  # a malformed value is never echoed
    monkeypatch.setenv("PHLOEM_TEST_HEADERS", ",".join(f"k{i}=v" for i in range(MAX_HEADERS)))
    assert len(cfg.headers()) == MAX_HEADERS
    monkeypatch.setenv("PHLOEM_TEST_HEADERS", ",".join(f"k{i}=v" for i in range(MAX_HEADERS + 1)))
    with pytest.raises(ValueError):
        cfg.headers()


def test_the_envelope_carries_a_bounded_trace_context_only_when_there_is_one() -> None:
    assert TraceContext.from_carrier(None) is None
    assert TraceContext.from_carrier({"traceparent": "short"}) is None
    ctx = TraceContext.from_carrier({"traceparent": VALID, "tracestate": "a=1"})
    assert ctx == TraceContext(VALID, "a=1")
    long_state = TraceContext.from_carrier({"traceparent": VALID, "tracestate": "x" * 513})
    assert long_state == TraceContext(VALID, "")
    plain = encode_frame(Ask(1, "echo", msgspec.Raw(msgspec.msgpack.encode(1))))
    assert b"trace" not in plain  # omitted: older peers see the envelope they know
    traced = decode_client(encode_frame(Ask(1, "echo", msgspec.Raw(b"\x01"), None, ctx))[4:])
    assert isinstance(traced, Ask) and traced.trace == ctx


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # all-zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # all-zero span id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
        "garbage",
        VALID + "-extra-bits-that-make-it-too-long",
    ],
)
def test_a_malformed_carrier_is_ignored(traceparent: str) -> None:
    before = telemetry.capture()
    with telemetry.attached({"traceparent": traceparent}):
        assert telemetry.carrier() is None
        assert telemetry.capture() == before


def test_a_valid_carrier_becomes_the_current_context_and_goes_on() -> None:
    with telemetry.attached({"traceparent": VALID, "tracestate": "vendor=x"}):
        carried = telemetry.carrier()
        assert carried == {"traceparent": VALID, "tracestate": "vendor=x"}
        assert telemetry.child_env() == {"TRACEPARENT": VALID, "TRACESTATE": "vendor=x"}
        assert telemetry.headers()["traceparent"] == VALID
    assert telemetry.carrier() is None


def test_an_embedded_service_call_with_a_bad_trace_is_served_normally() -> None:
    with phloem.Tree.start() as tree:
        answers: list[object] = []
        tree.call(
            tree.client()._transport.owner,  # type: ignore[attr-defined]
            "echo",
            msgspec.msgpack.encode({"hi": 1}),
            5.0,
            answers.append,
            trace={"traceparent": "garbage", "tracestate": "x" * 10_000},
        )
        from tests.helpers import wait_until

        wait_until(lambda: bool(answers))
        ok, body = answers[0]  # type: ignore[misc]
        assert ok and msgspec.msgpack.decode(body) == {"hi": 1}


def test_an_over_long_trace_field_on_the_wire_is_not_a_bad_frame() -> None:
    odd = TraceContext("x" * 100, "y" * 10_000)
    decoded = decode_client(encode_frame(Ask(7, "echo", msgspec.Raw(b"\x01"), None, odd))[4:])
    assert isinstance(decoded, Ask) and decoded.id == 7
    with telemetry.attached(decoded.trace.carrier() if decoded.trace else None):
        assert telemetry.carrier() is None  # ignored when attached


def test_malformed_export_headers_fail_the_start_loudly_without_echoing_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PHLOEM_TEST_HEADERS", "authorization-token-without-equals")
    cfg = parse_config(
        '[telemetry]\nenabled = true\nheaders_env = "PHLOEM_TEST_HEADERS"\n'
        'endpoint = "http://127.0.0.1:9"\n'
    )
    with pytest.raises(PhloemError) as info:
        phloem.Tree.start(cfg)
    assert "$PHLOEM_TEST_HEADERS" in info.value.message
    assert "authorization-token" not in info.value.message
    assert telemetry.active() is None


def test_an_over_long_tracestate_is_dropped_and_the_parent_kept() -> None:
    with telemetry.attached({"traceparent": VALID, "tracestate": "k=" + "v" * 600}):
        assert telemetry.carrier() == {"traceparent": VALID}


def test_the_flush_command_checks_its_timeout_and_needs_a_daemon(tmp_path: Any) -> None:
    from tests.helpers import run_cli

    sock = str(tmp_path / "none.sock")
    bad = run_cli("telemetry", "flush", "--timeout", "61", "--socket", sock)
    assert bad.returncode == 2 and "--timeout" in bad.stderr
    gone = run_cli("telemetry", "flush", "--timeout", "60", "--socket", sock)
    assert gone.returncode == 1 and "no_daemon" in gone.stderr
