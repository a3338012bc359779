"""The `telemetry` service: owns the SDK providers, the export bus and the interceptor.

Started first among the services (and so stopped last), when `[telemetry] enabled`: it
builds the providers from the config, installs them as the process's telemetry
(`phloem.base.telemetry`) and adds the GenAI interceptor outermost to the tree's chain. On
stop it takes the interceptor out, uninstalls, takes a last metric snapshot and drains
the bus within `drain_timeout_s` (what is left is counted as dropped, `shutdown`). Only
one tree per process exports: a second enabled tree in the same process logs
`telemetry_already_installed` and records nothing of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from phloem.actors.services import Call, ServiceActor, ServiceContext, register_service
from phloem.actors.telemetry.genai import GenAIInterceptor
from phloem.actors.telemetry.protocol import Flush, GetCounts, TelemetryRequest
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.supervision.spec import ChildSpec

if TYPE_CHECKING:
    from phloem.actors.telemetry.providers import TelemetryRuntime

log = get_logger("phloem.telemetry")

STOP_MARGIN_S = 3.0
"""Time the supervisor gives the service to stop beyond its drain deadline (a last metric
snapshot ≤ 1 s, the export workers' exit ≤ 1 s, and slack)."""


class TelemetryService(ServiceActor):
    """See the module docstring."""

    request_type = TelemetryRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        self.cfg = ctx.config.telemetry
        self.runtime: TelemetryRuntime | None = None
        self.interceptor = GenAIInterceptor(
            capture_content=self.cfg.capture_content, max_content_chars=self.cfg.max_content_chars
        )

    def on_start(self) -> None:
        super().on_start()
        # imported here: the SDK's exporters (requests, protobuf) cost a daemon with
        # telemetry off nothing at start
        from phloem.actors.telemetry.providers import TelemetryRuntime

        runtime = TelemetryRuntime(self.cfg)
        if not telemetry.install(runtime):
            log.warning("telemetry_already_installed")
            runtime.shutdown(0)
            return
        self.runtime = runtime
        self.ctx.interceptors.add(self.interceptor, first=True)
        log.info(
            "telemetry_started",
            endpoint=self.cfg.endpoint,
            sample_ratio=self.cfg.sample_ratio,
            capture_content=self.cfg.capture_content,
        )

    def on_stop(self) -> None:
        self._release()
        super().on_stop()

    def on_failure(self, *exc_info: Any) -> None:
        """A crash: release the interceptor and the runtime, so the restarted service
        installs afresh."""
        self._release()

    def _release(self) -> None:
        self.ctx.interceptors.remove(self.interceptor)
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            telemetry.uninstall(runtime)
            runtime.shutdown(self.cfg.drain_timeout_s)
            log.info("telemetry_stopped", **runtime.bus.counts())

    def handle(self, message: Any, call: Call) -> Any:
        runtime = self.runtime
        if isinstance(message, Flush) and runtime is not None:
            runtime.reader.collect(timeout_millis=message.timeout_s * 1000)
            runtime.bus.flush(message.timeout_s)
        if runtime is None:
            return {"enabled": False}
        return {"enabled": True, **runtime.bus.counts()}


def _factory(ctx: ServiceContext) -> ChildSpec | None:
    cfg = ctx.config.telemetry
    if not cfg.enabled:
        return None
    return ChildSpec(
        id=ctx.name,
        start=(TelemetryService, (ctx,), {}),
        shutdown=cfg.drain_timeout_s + STOP_MARGIN_S,
    )


_factory.__module__ = __name__
register_service("telemetry", _factory)

__all__ = ["Flush", "GetCounts", "TelemetryService"]
