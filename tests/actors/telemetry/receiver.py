"""A real OTLP/HTTP receiver on 127.0.0.1 for the telemetry tests.

It accepts `POST /v1/traces` and `POST /v1/metrics`, decodes the protobuf bodies with
`opentelemetry-proto` and keeps every span and metric data point. A test can make it
slow (`delay`), down (`close()`), or answer with a scripted status (`statuses`, e.g. a
503 with `Retry-After`) before it answers 200.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


@dataclass
class SpanRecord:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    kind: int
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Point:
    metric: str
    attributes: dict[str, Any]
    value: Any


@dataclass
class Receiver:
    delay: float = 0.0
    statuses: deque[tuple[int, dict[str, str]]] = field(default_factory=deque)
    spans: list[SpanRecord] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    requests: list[tuple[str, int, float]] = field(default_factory=list)  # path, status, time
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver._handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            scripted = self.statuses.popleft() if self.statuses else None
        status, headers = scripted or (200, {})
        with self._lock:
            self.requests.append((handler.path, status, time.monotonic()))
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
        if status == 200:
            self._decode(handler.path, body)
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("content-type", "application/x-protobuf")
        handler.send_header("content-length", "0")
        handler.end_headers()

    def _decode(self, path: str, body: bytes) -> None:
        with self._lock:
            self.raw.append(body)
        if path == "/v1/traces":
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            found = []
            for rs in req.resource_spans:
                resource = _attrs(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        found.append(
                            SpanRecord(
                                name=s.name,
                                trace_id=s.trace_id.hex(),
                                span_id=s.span_id.hex(),
                                parent_span_id=s.parent_span_id.hex(),
                                attributes=_attrs(s.attributes),
                                resource=resource,
                                status_code=s.status.code,
                                kind=s.kind,
                                events=[(e.name, _attrs(e.attributes)) for e in s.events],
                            )
                        )
            with self._lock:
                self.spans.extend(found)
        elif path == "/v1/metrics":
            req = ExportMetricsServiceRequest()
            req.ParseFromString(body)
            points = []
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        data = m.WhichOneof("data")
                        for dp in getattr(m, data).data_points:
                            value = (
                                dp.count
                                if data in ("histogram", "exponential_histogram")
                                else (dp.as_int if dp.HasField("as_int") else dp.as_double)
                            )
                            if data == "histogram":
                                value = (dp.count, dp.sum)
                            points.append(Point(m.name, _attrs(dp.attributes), value))
            with self._lock:
                self.points.extend(points)

    def span_named(self, prefix: str) -> list[SpanRecord]:
        with self._lock:
            return [s for s in self.spans if s.name.startswith(prefix)]

    def latest_points(self, metric: str) -> list[Point]:
        """The data points of `metric` in the last snapshot that had it."""
        with self._lock:
            points = [p for p in self.points if p.metric == metric]
        if not points:
            return []
        seen: dict[tuple[Any, ...], Point] = {}
        for p in points:
            seen[tuple(sorted((k, str(v)) for k, v in p.attributes.items()))] = p
        return list(seen.values())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
