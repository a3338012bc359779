"""The SDK providers built from `[telemetry]` alone, and the runtime installed for them.

Every SDK default that would read an `OTEL_*` variable is given explicitly here: the
resource (`service.name` from the config, not `OTEL_SERVICE_NAME` /
`OTEL_RESOURCE_ATTRIBUTES`), the sampler (parent-based, trace-id ratio `sample_ratio`),
the span limits, the exporters' endpoint, headers, timeout and compression, the metric
reader's interval and timeout, the exemplar filter. The exporters' requests session
ignores proxy variables and netrc (`trust_env = False`): telemetry goes to the endpoint
the config names, nowhere else. A collector's answer outside 2xx is never a success: a
redirect (3xx) is not followed and fails the export permanently (counted under
`export_failed`), where the SDK alone would count it exported and lose the batch.

Metric instruments are made on first use, at most `MAX_INSTRUMENTS`; every instrument
keeps at most `MAX_SERIES` attribute sets, further ones merging into the SDK's overflow
series (`otel.metric.overflow = true`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics._internal.exemplar import TraceBasedExemplarFilter
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from phloem._version import __version__
from phloem.actors.telemetry.bus import (
    DROP_REASONS,
    BusLimits,
    BusMetricExporter,
    BusSpanProcessor,
    ExportBus,
)
from phloem.actors.telemetry.settings import TelemetryConfig
from phloem.base.logs import get_logger
from phloem.base.telemetry import MAX_ATTRIBUTE_BYTES

log = get_logger("phloem.telemetry")

SCOPE = "phloem"
MAX_INSTRUMENTS = 64
MAX_SERIES = 200
MAX_SPAN_ATTRIBUTES = 64
MAX_SPAN_EVENTS = 64
SEMCONV_VERSION = "1.37.0"
"""The OpenTelemetry semantic conventions version the GenAI attributes follow."""

DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92)  # fmt: skip
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)  # fmt: skip
HISTOGRAMS: dict[str, tuple[str, str, tuple[float, ...]]] = {
    "gen_ai.client.operation.duration": ("s", "GenAI operation duration", DURATION_BUCKETS),
    "gen_ai.client.token.usage": ("{token}", "Tokens used per GenAI call", TOKEN_BUCKETS),
    "phloem.run.duration": ("s", "Run duration by kind and outcome", DURATION_BUCKETS),
}


class CollectorRedirected(requests.RequestException):
    """A collector answered a redirect: the batch is not delivered, and not retried."""


def _refuse_redirects(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """A response hook: a 3xx answer fails the export (its target is never named)."""
    if 300 <= response.status_code < 400:
        raise CollectorRedirected(f"the collector answered {response.status_code}, a redirect")


def _session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no proxy variables, no netrc
    session.hooks["response"].append(_refuse_redirects)
    return session


class TelemetryRuntime:
    """A tracer provider and a meter provider exporting through one `ExportBus`."""

    def __init__(self, cfg: TelemetryConfig) -> None:
        self.cfg = cfg
        # The exporter's own log lines (one per retry) would flood stderr while a
        # collector is down; failures are counted on the bus and shown by `phloem status`.
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        headers = cfg.headers()
        timeout = cfg.export_timeout_s
        self.span_exporter = OTLPSpanExporter(
            endpoint=cfg.signal_url("traces"),
            headers=headers,
            timeout=timeout,
            compression=Compression.NoCompression,
            session=_session(),
        )
        self.metric_exporter = OTLPMetricExporter(
            endpoint=cfg.signal_url("metrics"),
            headers=headers,
            timeout=timeout,
            compression=Compression.NoCompression,
            session=_session(),
        )
        self.bus = ExportBus(
            BusLimits(
                max_queue_events=cfg.max_queue_events,
                max_queue_bytes=cfg.max_queue_bytes,
                batch_size=cfg.batch_size,
                max_inflight_batches=cfg.max_inflight_batches,
                flush_interval_s=cfg.flush_interval_s,
            ),
            self.span_exporter.export,
            lambda data: self.metric_exporter.export(data, timeout_millis=timeout * 1000),
        )
        resource = Resource(
            {
                "service.name": cfg.service_name,
                "service.version": __version__,
                "telemetry.sdk.language": "python",
            }
        )
        self.tracer_provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(cfg.sample_ratio)),
            resource=resource,
            span_limits=SpanLimits(
                max_attributes=MAX_SPAN_ATTRIBUTES,
                max_events=MAX_SPAN_EVENTS,
                max_links=16,
                max_event_attributes=MAX_SPAN_ATTRIBUTES,
                max_link_attributes=16,
                max_span_attributes=MAX_SPAN_ATTRIBUTES,
                max_attribute_length=max(MAX_ATTRIBUTE_BYTES, cfg.max_content_chars * 4),
                max_span_attribute_length=max(MAX_ATTRIBUTE_BYTES, cfg.max_content_chars * 4),
            ),
            shutdown_on_exit=False,
        )
        self.tracer_provider.add_span_processor(BusSpanProcessor(self.bus))
        self._tracer = self.tracer_provider.get_tracer(SCOPE, __version__)
        self.reader = PeriodicExportingMetricReader(
            BusMetricExporter(self.bus),
            export_interval_millis=cfg.metric_interval_s * 1000,
            export_timeout_millis=timeout * 1000,
        )
        self.meter_provider = MeterProvider(
            metric_readers=[self.reader],
            resource=resource,
            exemplar_filter=TraceBasedExemplarFilter(),
            # the SDK keeps `limit` attribute sets and adds the overflow one: 200 in all
            views=[View(instrument_name="*", aggregation_cardinality_limit=MAX_SERIES - 1)],
            shutdown_on_exit=False,
        )
        self.meter = self.meter_provider.get_meter(SCOPE, __version__)
        self._instruments: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.instruments_refused = 0
        self.meter.create_observable_counter(
            "phloem.telemetry.exported", [self._observe_exported], "{item}", "Items exported"
        )
        self.meter.create_observable_counter(
            "phloem.telemetry.dropped", [self._observe_dropped], "{item}", "Items dropped"
        )

    # -- phloem.base.telemetry.Runtime ----------------------------------------------------------

    @property
    def tracer(self) -> trace.Tracer:
        return self._tracer

    def add(self, name: str, value: float, attributes: Mapping[str, Any]) -> None:
        counter = self._instrument(name, histogram=False)
        if counter is not None:
            counter.add(value, attributes)

    def record(self, name: str, value: float, attributes: Mapping[str, Any]) -> None:
        histogram = self._instrument(name, histogram=True)
        if histogram is not None:
            histogram.record(value, attributes)

    def counts(self) -> dict[str, Any]:
        return self.bus.counts()

    def _instrument(self, name: str, *, histogram: bool) -> Any:
        found = self._instruments.get(name)
        if found is not None:
            return found
        with self._lock:
            found = self._instruments.get(name)
            if found is not None:
                return found
            if len(self._instruments) >= MAX_INSTRUMENTS:
                self.instruments_refused += 1
                return None
            if histogram:
                unit, description, buckets = HISTOGRAMS.get(name, ("1", "", DURATION_BUCKETS))
                found = self.meter.create_histogram(
                    name, unit, description, explicit_bucket_boundaries_advisory=buckets
                )
            else:
                found = self.meter.create_counter(name, "1")
            self._instruments[name] = found
            return found

    def _observe_exported(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self.bus.counts()["exported"])]

    def _observe_dropped(self, options: CallbackOptions) -> Iterable[Observation]:
        by_reason = self.bus.counts()["dropped_by_reason"]
        return [Observation(by_reason[r], {"reason": r}) for r in DROP_REASONS]

    # -- lifecycle -------------------------------------------------------------------------

    def shutdown(self, timeout_s: float) -> None:
        """Take a last metric snapshot, drain the bus within `timeout_s`, stop exporting."""
        try:  # its reader offers one last snapshot to the bus
            self.meter_provider.shutdown(timeout_millis=min(timeout_s, 1.0) * 1000)
            self.tracer_provider.shutdown()
        except Exception as exc:
            log.debug("telemetry_provider_shutdown_failed", error=type(exc).__name__)
        self.bus.drain(timeout_s)
        self.span_exporter.shutdown()  # type: ignore[no-untyped-call]
        self.metric_exporter.shutdown()
