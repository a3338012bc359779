"""The export bus: a bounded queue between the SDK's processors and the OTLP exporters.

Finished spans (from `BusSpanProcessor.on_end`) and metric snapshots (from
`BusMetricExporter`, fed by the SDK's periodic reader) are *offered*: the call never
blocks and never waits for the network. The queue is bounded in items
(`max_queue_events`) and in estimated bytes (`max_queue_bytes`); what does not fit is
dropped at once and counted (`queue_full`). `max_inflight_batches` worker threads take
batches of at most `batch_size` items of one signal (waiting up to `flush_interval_s` for
a batch to fill) and hand them to the official OTLP/HTTP exporters. Those retry only
transient failures (429, 502, 503, 504, transport errors) with capped exponential backoff
that honours `Retry-After`, all within `export_timeout_s`; a batch still failing is
dropped and counted (`export_failed`, plus one `failed` export). `drain` stops taking new
items, lets the workers empty the queue until its deadline and counts whatever is left
(`shutdown`). So a slow or dead collector costs a run nothing and memory stays bounded.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry.context import Context
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExportResult

from phloem.base.logs import get_logger

log = get_logger("phloem.telemetry")

Signal = Literal["spans", "metrics"]
DropReason = Literal["queue_full", "export_failed", "shutdown"]
DROP_REASONS: tuple[DropReason, ...] = ("queue_full", "export_failed", "shutdown")

SPAN_BASE_BYTES = 256
"""The estimated cost of one span before its attributes and events."""
METRICS_ITEM_BYTES = 64 * 1024
"""The estimated cost of one metric snapshot in the queue."""
MAX_WORKER_JOIN_S = 1.0


@dataclass(frozen=True, slots=True)
class BusLimits:
    max_queue_events: int
    max_queue_bytes: int
    batch_size: int
    max_inflight_batches: int
    flush_interval_s: float


@dataclass(slots=True)
class _Item:
    signal: Signal
    value: Any
    size: int
    count: int  # data points a metrics item carries count as one export unit


SpanExport = Callable[[Sequence[ReadableSpan]], SpanExportResult]
MetricsExport = Callable[[MetricsData], MetricExportResult]


class ExportBus:
    """Bounded, counted, never-blocking delivery from the SDK to the exporters."""

    def __init__(
        self,
        limits: BusLimits,
        export_spans: SpanExport,
        export_metrics: MetricsExport,
        name: str = "telemetry",
    ) -> None:
        self.limits = limits
        self._export_spans = export_spans
        self._export_metrics = export_metrics
        self._queue: deque[_Item] = deque()
        self._bytes = 0
        self._cond = threading.Condition(threading.Lock())
        self._closing = False
        self._inflight = 0
        self._hurry = 0  # flushes waiting: workers send partial batches at once
        self.offered = 0
        self.exported = 0
        self.failed = 0
        self.dropped: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)
        self.peak_events = 0
        self._workers = [
            threading.Thread(target=self._work, name=f"{name}-export-{i}", daemon=True)
            for i in range(limits.max_inflight_batches)
        ]
        for worker in self._workers:
            worker.start()

    # -- producers ------------------------------------------------------------------------

    def offer(self, signal: Signal, value: Any, size: int) -> bool:
        """Queue one item; False (dropped, counted) if the bus is full or closing."""
        with self._cond:
            self.offered += 1
            if self._closing:
                self.dropped["shutdown"] += 1
                return False
            lim = self.limits
            if len(self._queue) >= lim.max_queue_events or self._bytes + size > lim.max_queue_bytes:
                self.dropped["queue_full"] += 1
                return False
            self._queue.append(_Item(signal, value, size, 1))
            self._bytes += size
            self.peak_events = max(self.peak_events, len(self._queue))
            if len(self._queue) >= lim.batch_size or signal == "metrics":
                self._cond.notify()
            elif len(self._queue) == 1:
                self._cond.notify()  # wakes a worker to start the flush timer
            return True

    # -- workers ---------------------------------------------------------------------------

    def _take(self) -> list[_Item] | None:
        """The next batch (one signal), waiting for it to fill up to the flush interval;
        None once closing and empty."""
        lim = self.limits
        with self._cond:
            while not self._queue:
                if self._closing:
                    return None
                self._cond.wait()
            first_seen = time.monotonic()
            while (
                not self._closing
                and not self._hurry
                and self._queue
                and len(self._queue) < lim.batch_size
                and self._queue[0].signal == "spans"
            ):
                left = first_seen + lim.flush_interval_s - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if not self._queue:
                return [] if not self._closing else None
            signal = self._queue[0].signal
            batch: list[_Item] = []
            limit = lim.batch_size if signal == "spans" else 1
            while self._queue and len(batch) < limit and self._queue[0].signal == signal:
                item = self._queue.popleft()
                self._bytes -= item.size
                batch.append(item)
            self._inflight += 1
            if not self._queue:
                self._cond.notify_all()  # a drain may be waiting for empty
            return batch

    def _work(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue
            ok = False
            try:
                ok = self._send(batch)
            except Exception as exc:  # an exporter bug must not kill the worker
                log.warning("telemetry_export_crashed", error=type(exc).__name__)
            with self._cond:
                self._inflight -= 1
                units = sum(item.count for item in batch)
                if ok:
                    self.exported += units
                else:
                    self.failed += 1
                    self.dropped["export_failed"] += units
                self._cond.notify_all()

    def _send(self, batch: list[_Item]) -> bool:
        signal = batch[0].signal
        if signal == "spans":
            result = self._export_spans([item.value for item in batch])
            return bool(result is SpanExportResult.SUCCESS)
        metrics = self._export_metrics(batch[0].value)
        return bool(metrics is MetricExportResult.SUCCESS)

    # -- control ---------------------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """Wait until the queue is empty and nothing is in flight; False at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._hurry += 1
            try:
                self._cond.notify_all()
                while self._queue or self._inflight:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(min(left, 0.05))
                    self._cond.notify_all()
            finally:
                self._hurry -= 1
        return True

    def drain(self, timeout_s: float) -> None:
        """Stop taking items, export what is queued until the deadline, count the rest
        (`shutdown`) and stop the workers."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self.flush(timeout_s)
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            self._bytes = 0
            self.dropped["shutdown"] += left
            self._cond.notify_all()
        # workers still in an export (a slow collector) are left to finish it: daemon
        # threads, their batches counted when they return
        join_until = time.monotonic() + (MAX_WORKER_JOIN_S if timeout_s > 0 else 0)
        for worker in self._workers:
            worker.join(max(0.0, join_until - time.monotonic()))

    def counts(self) -> dict[str, Any]:
        """`{offered, exported, dropped, failed, dropped_by_reason, queued, ...}` in items
        (a span, or a metric snapshot); `offered == exported + dropped + queued + inflight`
        at every moment (`inflight` counts batches, not items)."""
        with self._cond:
            inflight_items = self.offered - self.exported - sum(self.dropped.values())
            return {
                "offered": self.offered,
                "exported": self.exported,
                "dropped": sum(self.dropped.values()),
                "failed": self.failed,
                "dropped_by_reason": dict(self.dropped),
                "queued": len(self._queue),
                "queued_bytes": self._bytes,
                "inflight": inflight_items - len(self._queue),
                "peak_queued": self.peak_events,
            }


def span_size(span: ReadableSpan) -> int:
    """A cheap estimate of a span's encoded size (name, string attributes, events)."""
    size = SPAN_BASE_BYTES + len(span.name)
    for value in (span.attributes or {}).values():
        size += 16 + (len(value) if isinstance(value, str) else 8)
    for event in span.events:
        size += 32 + len(event.name) + 24 * len(event.attributes or {})
    return size


class BusSpanProcessor(SpanProcessor):
    """Offers every sampled, finished span to the bus (never blocks the span's thread)."""

    def __init__(self, bus: ExportBus) -> None:
        self.bus = bus

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self.bus.offer("spans", span, span_size(span))

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.bus.flush(timeout_millis / 1000)


class BusMetricExporter(MetricExporter):
    """The SDK's periodic reader exports here: each snapshot is offered to the bus."""

    def __init__(self, bus: ExportBus) -> None:
        super().__init__(
            preferred_temporality=dict.fromkeys(
                _instrument_classes(), AggregationTemporality.CUMULATIVE
            )
        )
        self.bus = bus

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        if self.bus.offer("metrics", metrics_data, METRICS_ITEM_BYTES):
            return MetricExportResult.SUCCESS
        return MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def _instrument_classes() -> list[type]:
    from opentelemetry.sdk.metrics import (
        Counter,
        Histogram,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
        UpDownCounter,
    )

    return [
        Counter,
        Histogram,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
        UpDownCounter,
    ]
