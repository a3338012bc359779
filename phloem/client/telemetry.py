"""Telemetry methods of `phloem.Client` (daemon socket and `tree.client()` alike).

`flush_telemetry()` asks the `telemetry` service to export what is queued now (spans, and
a metric snapshot taken at once) and answers the export bus's counts — the `telemetry`
key of `status()`, which shows the same counts without flushing. With telemetry off
(no `telemetry` service) it answers `{"enabled": False}`.
"""

from __future__ import annotations

from typing import Any

from phloem.actors.telemetry.protocol import Flush
from phloem.client.base import AsyncClientBase, ClientBase
from phloem.protocols.errors import ErrorKind, PhloemError

TELEMETRY_SERVICE = "telemetry"
REQUEST_SLACK_S = 5.0


def _off(err: PhloemError) -> dict[str, Any]:
    if err.kind == ErrorKind.UNKNOWN_ACTOR:
        return {"enabled": False}
    raise err


class TelemetryMethods(ClientBase):
    def flush_telemetry(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """Export what is queued, waiting up to `timeout_s`; the bus's counts."""
        try:
            reply = self.ask(
                TELEMETRY_SERVICE, Flush(timeout_s), timeout=timeout_s + REQUEST_SLACK_S
            )
        except PhloemError as err:
            return _off(err)
        return dict(reply)


class AsyncTelemetryMethods(AsyncClientBase):
    async def flush_telemetry(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """Export what is queued, waiting up to `timeout_s`; the bus's counts."""
        try:
            reply = await self.ask(
                TELEMETRY_SERVICE, Flush(timeout_s), timeout=timeout_s + REQUEST_SLACK_S
            )
        except PhloemError as err:
            return _off(err)
        return dict(reply)
