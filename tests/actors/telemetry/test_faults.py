"""A collector that is down, slow, answering 503 with Retry-After, refusing a batch, and a
10,000-span burst into a small queue: runs never wait for it, memory stays bounded, and
every item offered is accounted for exactly (exported, or dropped by one reason)."""

from __future__ import annotations

import socket
import time
from collections import deque
from typing import Any

import msgspec
import pytest

import phloem
from phloem.agents import LlmAgent
from phloem.base import telemetry
from phloem.config import Config
from phloem.models import ScriptedModel
from tests.helpers import wait_until

from . import components
from .receiver import Receiver

pytestmark = pytest.mark.timeout(90)


def config(endpoint: str, **keys: Any) -> Config:
    settings = {
        "enabled": True,
        "endpoint": endpoint,
        "flush_interval_s": 0.05,
        "metric_interval_s": 3600,
        **keys,
    }
    return msgspec.convert({"telemetry": settings}, Config)


def dead_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # closed: connections are refused


def counts(tree: phloem.Tree) -> dict[str, Any]:
    return msgspec.to_builtins(tree.status().telemetry)  # type: ignore[no-any-return]


def settled(tree: phloem.Tree, timeout: float = 30.0) -> dict[str, Any]:
    """The counts once nothing is queued or in flight; checks the accounting identity."""
    wait_until(lambda: counts(tree)["queued"] == 0 and counts(tree)["inflight"] == 0, timeout)
    c = counts(tree)
    assert c["offered"] == c["exported"] + c["dropped"]
    assert c["dropped"] == sum(c["dropped_by_reason"].values())
    return c


def small_run(tree: phloem.Tree) -> float:
    """One agent run with a model and a tool call; its duration in seconds."""
    agent = LlmAgent("a", "", ScriptedModel(["done"]))
    started = time.monotonic()
    run = tree.run_agent(agent, input="go")
    assert run.ok, run.outcome
    return time.monotonic() - started


def test_a_dead_collector_costs_runs_nothing_and_every_span_is_counted_failed() -> None:
    cfg = config(dead_endpoint(), export_timeout_s=1.0, drain_timeout_s=0.5)
    with phloem.Tree.start(cfg) as tree:
        for _ in range(5):
            small_run(tree)
        c = settled(tree)
        assert c["offered"] >= 10 and c["exported"] == 0
        assert c["failed"] >= 1
        assert c["dropped_by_reason"]["export_failed"] == c["offered"]


def test_a_slow_collector_never_slows_a_run_and_shutdown_keeps_its_deadline() -> None:
    with Receiver(delay=10.0) as rx:
        cfg = config(
            rx.endpoint,
            export_timeout_s=1.0,
            drain_timeout_s=1.0,
            max_queue_events=64,
            batch_size=8,
        )
        tree = phloem.Tree.start(cfg)
        try:
            started = time.monotonic()
            components.burst(2_000)
            for _ in range(3):
                small_run(tree)
            # each export takes 10 s; nothing here waited for one
            assert time.monotonic() - started < rx.delay
            c = counts(tree)
            assert c["peak_queued"] <= 64
            assert c["dropped_by_reason"]["queue_full"] > 0
            assert c["offered"] == c["exported"] + c["dropped"] + c["queued"] + c["inflight"]
        finally:
            stopping = time.monotonic()
            tree.stop()
            # drain 1 s, then the workers are abandoned (daemon threads): never 10 s
            assert time.monotonic() - stopping < rx.delay


def test_503_with_retry_after_is_retried_after_the_pause_it_asks_for() -> None:
    with Receiver() as rx:
        rx.statuses = deque([(503, {"Retry-After": "1"})])
        with phloem.Tree.start(config(rx.endpoint, export_timeout_s=10.0)) as tree:
            small_run(tree)
            c = settled(tree)
            assert c["failed"] == 0 and c["dropped"] == 0 and c["exported"] == c["offered"]
        traces = [(status, at) for path, status, at in rx.requests if path == "/v1/traces"]
        assert traces[0][0] == 503 and traces[1][0] == 200
        assert traces[1][1] - traces[0][1] >= 0.9  # Retry-After: 1, honoured
        assert rx.span_named("invoke_agent a")


def test_a_permanent_failure_is_not_retried_and_its_spans_are_counted() -> None:
    with Receiver() as rx:
        rx.statuses = deque([(400, {})])
        with phloem.Tree.start(config(rx.endpoint, batch_size=1000)) as tree:
            with telemetry.span("one"), telemetry.span("two"):
                pass
            c = settled(tree)
            assert c["failed"] == 1 and c["dropped_by_reason"]["export_failed"] == 2
            small_run(tree)
            c = settled(tree)
            assert c["failed"] == 1 and c["exported"] >= 2
        assert [s for p, s, _ in rx.requests if p == "/v1/traces"][:2] == [400, 200]


@pytest.mark.parametrize("status", [301, 307, 308])
def test_a_redirecting_collector_is_a_counted_permanent_failure_never_followed(
    status: int,
) -> None:
    with Receiver() as rx, Receiver() as elsewhere:
        where = {"Location": elsewhere.endpoint + "/v1/traces"}
        rx.statuses = deque([(status, where)])
        with phloem.Tree.start(config(rx.endpoint, batch_size=1000)) as tree:
            with telemetry.span("one"), telemetry.span("two"):
                pass
            c = settled(tree)
            assert c["exported"] == 0 and c["failed"] == 1
            assert c["dropped_by_reason"]["export_failed"] == 2
        assert [s for p, s, _ in rx.requests if p == "/v1/traces"][:1] == [status]
        assert elsewhere.requests == []  # the redirect is not followed


def test_a_10000_span_burst_into_a_small_queue_is_counted_exactly() -> None:
    with Receiver() as rx:
        cfg = config(rx.endpoint, max_queue_events=100, batch_size=50, max_inflight_batches=1)
        with phloem.Tree.start(cfg) as tree:
            before = counts(tree)["offered"]
            components.burst(10_000)
            c = settled(tree)
            assert c["offered"] - before == 10_000
            assert c["peak_queued"] <= 100
            assert c["dropped_by_reason"]["queue_full"] > 0
            assert c["dropped_by_reason"]["export_failed"] == 0
            exported = c["exported"]
        assert len(rx.span_named("burst")) == exported


def test_a_full_byte_budget_drops_even_when_the_count_has_room() -> None:
    with Receiver(delay=10.0) as rx:
        cfg = config(rx.endpoint, max_queue_bytes=4096, export_timeout_s=1.0, drain_timeout_s=0)
        tree = phloem.Tree.start(cfg)
        try:
            for i in range(100):
                with telemetry.span("x", payload="p" * 200, i=i):
                    pass
            c = counts(tree)
            assert c["dropped_by_reason"]["queue_full"] > 0
            assert c["queued"] < 100
        finally:
            tree.stop()


@pytest.mark.parametrize("status", [429, 502, 504])
def test_each_transient_status_is_retried(status: int) -> None:
    with Receiver() as rx:
        rx.statuses = deque([(status, {"Retry-After": "0"})])
        with phloem.Tree.start(config(rx.endpoint, export_timeout_s=10.0)) as tree:
            with telemetry.span("retried"):
                pass
            c = settled(tree)
            assert c["failed"] == 0 and c["exported"] == c["offered"] == 1
        assert [s for p, s, _ in rx.requests if p == "/v1/traces"] == [status, 200]


def test_a_retry_after_beyond_the_export_timeout_is_not_waited_for() -> None:
    with Receiver() as rx:
        rx.statuses = deque([(503, {"Retry-After": "3600"})])
        with phloem.Tree.start(config(rx.endpoint, export_timeout_s=2.0)) as tree:
            with telemetry.span("refused"):
                pass
            c = settled(tree, timeout=20.0)  # the exporter gives up at once, never waits 1 h
            assert c["failed"] == 1 and c["dropped_by_reason"]["export_failed"] == 1
        assert [s for p, s, _ in rx.requests if p == "/v1/traces"] == [503]


def test_stopping_exports_what_is_queued_within_the_drain_deadline() -> None:
    with Receiver() as rx:
        # batches would wait a minute to fill: only the drain on stop sends them
        cfg = config(rx.endpoint, flush_interval_s=60.0, batch_size=4096, drain_timeout_s=10.0)
        tree = phloem.Tree.start(cfg)
        try:
            for i in range(50):
                with telemetry.span("queued", i=i):
                    pass
            wait_until(lambda: counts(tree)["offered"] == 50)
            assert rx.span_named("queued") == []
        finally:
            tree.stop()
        assert len(rx.span_named("queued")) == 50
