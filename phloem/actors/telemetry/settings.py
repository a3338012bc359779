"""The `[telemetry]` configuration section (off by default; the config is the one source:
the standard `OTEL_*` environment variables are not read)."""

from __future__ import annotations

import os
import re
from typing import Annotated

import msgspec

from phloem.base.settings import Section

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_HEADERS = 32
MAX_HEADER_CHARS = 4096


class TelemetryConfig(Section):
    """`[telemetry]`: where to export (OTLP/HTTP base URL), what to record and the bounds
    of the export bus. Headers (an API key, say) come from the variable named by
    `headers_env` as `k=v,k=v`, never from the file."""

    enabled: bool = False  # record traces and metrics and export them
    # The OTLP/HTTP base URL; `/v1/traces` and `/v1/metrics` are added to it.
    endpoint: str = "http://127.0.0.1:4318"
    # Variable holding the export headers as `k=v,k=v` (an API key, say); "": none.
    headers_env: str = ""
    # The `service.name` resource attribute.
    service_name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] = "phloem"
    # Share of traces recorded; parent-based, so a caller's decision is kept.
    sample_ratio: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 1.0
    # Record prompts, responses, tool arguments and results (bounded, secret-pruned).
    capture_content: bool = False
    # Longest captured content attribute; a longer one is cut.
    max_content_chars: Annotated[int, msgspec.Meta(ge=64, le=65_536)] = 4096
    # Time one export has, retries included; then its items are dropped (`export_failed`).
    export_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 10.0
    # How often a metric snapshot is taken.
    metric_interval_s: Annotated[float, msgspec.Meta(ge=0.1, le=3600)] = 30.0
    # Items the export bus queues; one more is dropped (`queue_full`).
    max_queue_events: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 4096
    # Bytes the export bus queues; an item past them is dropped (`queue_full`).
    max_queue_bytes: Annotated[int, msgspec.Meta(ge=4096, le=1 << 30)] = 16 * 1024 * 1024
    batch_size: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 256  # items per export request
    # Export requests at once (one worker each).
    max_inflight_batches: Annotated[int, msgspec.Meta(ge=1, le=16)] = 2
    # How long a batch may wait to fill before it is sent.
    flush_interval_s: Annotated[float, msgspec.Meta(ge=0.01, le=60)] = 0.5
    # On stop, time to export what is queued; what is left is dropped (`shutdown`).
    drain_timeout_s: Annotated[float, msgspec.Meta(ge=0, le=300)] = 5.0

    def __post_init__(self) -> None:
        if not self.endpoint.startswith(("http://", "https://")) or len(self.endpoint) > 2048:
            raise ValueError("telemetry.endpoint: expected an http(s) URL of at most 2048 chars")
        if self.headers_env and not ENV_NAME_RE.match(self.headers_env):
            raise ValueError("telemetry.headers_env: expected an environment variable name")

    def signal_url(self, signal: str) -> str:
        """The full OTLP/HTTP URL of `signal` (`traces`, `metrics`)."""
        return f"{self.endpoint.rstrip('/')}/v1/{signal}"

    def headers(self) -> dict[str, str]:
        """The export headers from `$headers_env` (`k=v,k=v`); malformed pairs raise."""
        if not self.headers_env:
            return {}
        raw = os.environ.get(self.headers_env, "")
        if len(raw) > MAX_HEADER_CHARS:
            raise ValueError(f"${self.headers_env}: longer than {MAX_HEADER_CHARS} chars")
        out: dict[str, str] = {}
        for pair in filter(None, (p.strip() for p in raw.split(","))):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"${self.headers_env}: expected k=v pairs separated by commas")
            out[key.strip().lower()] = value.strip()
        if len(out) > MAX_HEADERS:
            raise ValueError(f"${self.headers_env}: more than {MAX_HEADERS} headers")
        return out
