"""`live_connect` and `evaluate` spans, exported to a real OTLP/HTTP receiver."""

from __future__ import annotations

import msgspec
import pytest

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.settings import LiveConfig
from phloem.config import Config
from tests.helpers import ROOT, wait_until

from .receiver import Receiver
from .test_spans import tree_config

pytestmark = pytest.mark.timeout(60)


def test_each_live_connection_is_a_live_connect_span_until_setup(receiver: Receiver) -> None:
    with FakeLiveServer() as server:
        config = msgspec.structs.replace(
            tree_config(receiver), live=LiveConfig(base_url=server.url)
        )
        with phloem.Tree.start(config) as tree, tree.client() as client:
            ref = client.live_open({"response_modalities": ["TEXT"]})
            window = phloem.CreditWindow(messages=64, bytes=1 << 20)
            for event in client.live_events(ref, window):
                if event.kind == "ready":
                    client.live_close(ref)
            client.flush_telemetry(5.0)
    wait_until(lambda: receiver.span_named("live_connect"), 10, "live_connect exported")
    (span,) = receiver.span_named("live_connect")
    assert span.attributes["server.address"] == "127.0.0.1"
    assert "error.type" not in span.attributes


def test_a_refused_live_connection_ends_its_span_with_the_reason(receiver: Receiver) -> None:
    config = msgspec.structs.replace(
        tree_config(receiver),
        live=LiveConfig(base_url="ws://127.0.0.1:9", max_reconnect_attempts=0),
    )
    with phloem.Tree.start(config) as tree, tree.client() as client:
        ref = client.live_open({"response_modalities": ["TEXT"]})
        window = phloem.CreditWindow(messages=64, bytes=1 << 20)
        kinds = [event.kind for event in client.live_events(ref, window)]
        assert kinds[-1] == "closed"
        client.flush_telemetry(5.0)
    wait_until(lambda: receiver.span_named("live_connect"), 10, "live_connect exported")
    assert receiver.span_named("live_connect")[0].attributes["error.type"] == "connect_failed"


def test_an_evaluation_is_one_evaluate_span(receiver: Receiver) -> None:
    config = msgspec.convert(
        {
            "telemetry": msgspec.to_builtins(tree_config(receiver).telemetry),
            "agents": {"components": {"helpdesk": "phloem.examples.helpdesk_eval:helpdesk"}},
        },
        Config,
    )
    evalset = ROOT / "conf/examples/eval/helpdesk.evalset.json"
    with phloem.Tree.start(config) as tree, tree.client() as client:
        report = client.run_eval(str(evalset), agent="helpdesk")
        client.flush_telemetry(5.0)
    wait_until(lambda: receiver.span_named("evaluate"), 10, "evaluate exported")
    (span,) = receiver.span_named("evaluate")
    assert span.attributes["phloem.eval.cases"] == 4
    assert span.attributes["phloem.eval.status"] == report.status
    assert span.attributes["phloem.eval.pass_rate"] == report.pass_rate
    agents = receiver.span_named("invoke_agent helpdesk")
    assert agents and all(a.trace_id == span.trace_id for a in agents)
