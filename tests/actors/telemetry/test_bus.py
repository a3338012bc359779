"""The export bus at its edges, with export functions the test controls (the real
exporter against a real receiver is in test_faults / test_spans)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import MetricExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from phloem.actors.telemetry.bus import BusLimits, ExportBus
from phloem.actors.telemetry.providers import MAX_INSTRUMENTS, TelemetryRuntime
from phloem.actors.telemetry.settings import TelemetryConfig
from phloem.base import telemetry
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(30)


class Gate:
    """Export functions that record batches and block until released."""

    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS) -> None:
        self.open = threading.Event()
        self.batches: list[list[Any]] = []
        self.metrics: list[Any] = []
        self.result = result

    def spans(self, batch: Sequence[Any]) -> SpanExportResult:
        self.open.wait(10)
        self.batches.append(list(batch))
        return self.result

    def metric(self, data: Any) -> MetricExportResult:
        self.metrics.append(data)
        return MetricExportResult.SUCCESS


def bus(gate: Gate, **limits: Any) -> ExportBus:
    values = {
        "max_queue_events": 4,
        "max_queue_bytes": 1000,
        "batch_size": 2,
        "max_inflight_batches": 1,
        "flush_interval_s": 0.01,
        **limits,
    }
    return ExportBus(BusLimits(**values), gate.spans, gate.metric)


def test_the_queue_holds_exactly_max_queue_events_and_counts_the_rest() -> None:
    gate = Gate()
    b = bus(gate, batch_size=100, flush_interval_s=30)  # nothing leaves while we fill
    assert all(b.offer("spans", i, 10) for i in range(4))
    assert not b.offer("spans", 4, 10)
    c = b.counts()
    assert c["queued"] == 4 and c["dropped_by_reason"]["queue_full"] == 1 and c["offered"] == 5
    gate.open.set()
    b.drain(5)
    assert b.counts()["exported"] == 4 and b.counts()["dropped"] == 1


def test_the_byte_budget_is_an_edge_too() -> None:
    gate = Gate()
    b = bus(gate, max_queue_bytes=100, flush_interval_s=30, batch_size=100)
    assert b.offer("spans", "a", 60) and b.offer("spans", "b", 40)  # exactly 100
    assert not b.offer("spans", "c", 1)
    assert b.counts()["queued_bytes"] == 100
    gate.open.set()
    b.drain(5)


def test_batches_keep_to_batch_size_and_in_flight_to_its_limit() -> None:
    gate = Gate()
    b = bus(gate, max_queue_events=10, batch_size=3)
    for i in range(7):
        assert b.offer("spans", i, 1)
    wait_until(lambda: b.counts()["inflight"] == 3)  # one batch of 3 waits on the gate
    assert b.counts()["queued"] == 4
    gate.open.set()
    assert b.flush(5)
    assert [len(x) for x in gate.batches] == [3, 3, 1]
    assert b.counts()["exported"] == 7
    b.drain(1)


def test_metric_snapshots_travel_alone() -> None:
    gate = Gate()
    gate.open.set()
    b = bus(gate, batch_size=10)
    b.offer("spans", 1, 1)
    b.offer("metrics", "snapshot", 1)
    b.offer("spans", 2, 1)
    assert b.flush(5)
    assert gate.metrics == ["snapshot"]
    assert sum(len(x) for x in gate.batches) == 2
    b.drain(1)


def test_failed_and_crashed_exports_are_counted_per_item() -> None:
    gate = Gate(SpanExportResult.FAILURE)
    gate.open.set()
    b = bus(gate, batch_size=2)
    b.offer("spans", 1, 1)
    b.offer("spans", 2, 1)
    assert b.flush(5)
    c = b.counts()
    assert c["failed"] == 1 and c["dropped_by_reason"]["export_failed"] == 2

    def crash(batch: Sequence[Any]) -> SpanExportResult:
        raise RuntimeError("exporter bug")

    crashing = ExportBus(b.limits, crash, gate.metric)
    crashing.offer("spans", 1, 1)
    assert crashing.flush(5)
    assert crashing.counts()["dropped_by_reason"]["export_failed"] == 1
    assert crashing.offer("spans", 2, 1) and crashing.flush(5)  # the worker lives on
    b.drain(1)
    crashing.drain(1)


def test_drain_counts_what_it_could_not_send_and_refuses_later_items() -> None:
    gate = Gate()  # never opened: the first batch hangs in flight
    b = bus(gate, batch_size=1, max_queue_events=10)
    for i in range(5):
        b.offer("spans", i, 1)
    wait_until(lambda: b.counts()["inflight"] == 1)
    b.drain(0.2)
    c = b.counts()
    assert c["dropped_by_reason"]["shutdown"] == 4 and c["queued"] == 0
    assert not b.offer("spans", 9, 1)
    assert b.counts()["dropped_by_reason"]["shutdown"] == 5
    gate.open.set()
    wait_until(lambda: b.counts()["inflight"] == 0)
    c = b.counts()
    assert c["offered"] == c["exported"] + c["dropped"] == 6


def test_instruments_are_capped() -> None:
    runtime = TelemetryRuntime(TelemetryConfig(enabled=True, endpoint="http://127.0.0.1:9"))
    try:
        for i in range(MAX_INSTRUMENTS + 5):
            runtime.add(f"phloem.test.instrument{i}", 1, {})
        assert len(runtime._instruments) == MAX_INSTRUMENTS
        assert runtime.instruments_refused == 5
        assert telemetry.active() is None  # a runtime is inert until installed
    finally:
        runtime.shutdown(0)
