"""Requests of the `telemetry` service (a tagged union, as every service's)."""

from __future__ import annotations

from typing import Annotated

import msgspec


class GetCounts(msgspec.Struct, tag="counts", frozen=True, forbid_unknown_fields=True):
    """The export bus's counts (the `telemetry` key of `phloem status`)."""


class Flush(msgspec.Struct, tag="flush", frozen=True, forbid_unknown_fields=True):
    """Export what is queued (spans, and a metric snapshot now); wait up to `timeout_s`."""

    timeout_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 5.0


TelemetryRequest = GetCounts | Flush
