"""Telemetry: OpenTelemetry traces and metrics (GenAI semantic conventions) exported over
OTLP/HTTP by the official exporter through a bounded, counted export bus.

`settings` declares `[telemetry]`; `providers` builds the SDK providers from it (never
from `OTEL_*` variables); `bus` is the bounded queue and its export workers; `genai` the
interceptor whose spans wrap every agent, model and tool call; `service` the supervised
`telemetry` service that owns them. Code anywhere records through `phloem.base.telemetry`.
"""
