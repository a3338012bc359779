"""The `cluster` service: owns the Ray backend while `[cluster] backend = "ray"`.

Started right after telemetry (so stopped after every service that starts remote
children): its start connects to the cluster — a tree whose cluster cannot be reached
does not start (`start_failed`, naming the cause) — and its stop kills every remote call
in flight and every worker, then disconnects. The backend is shared
(`ServiceContext.resources.cluster`), and `resources.launcher(kind)` hands each feature
the launcher of its kind. It answers `GetClusterStatus` and `CheckCluster` (`phloem cluster ...`).
"""

from __future__ import annotations

import threading
from typing import Any

from phloem.actors.cluster.protocol import CheckCluster, ClusterRequest, GetClusterStatus
from phloem.actors.services import DEFER, Call, ServiceActor, ServiceContext, register_service
from phloem.base.logs import get_logger
from phloem.cluster.backend import RayBackend
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision.spec import ChildSpec

log = get_logger("phloem.cluster")

SERVICE_NAME = "cluster"
STOP_MARGIN_S = 30.0
"""How long the supervisor gives the service to kill workers and disconnect."""
MAX_CHECKS = 2
"""`CheckCluster` requests running at once; one more is answered `busy`."""


class ClusterService(ServiceActor):
    """See the module docstring."""

    request_type = ClusterRequest

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        backend = ctx.resources.cluster
        if not isinstance(backend, RayBackend):
            raise PhloemError(ErrorKind.START_FAILED, "the cluster backend is missing")
        self.backend = backend
        self._checks = threading.BoundedSemaphore(MAX_CHECKS)

    def on_start(self) -> None:
        super().on_start()
        self.backend.connect()

    def on_stop(self) -> None:
        self.backend.shutdown()
        super().on_stop()

    def on_failure(self, *exc_info: Any) -> None:
        self.backend.shutdown()

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, GetClusterStatus):
            return self.backend.status()
        assert isinstance(message, CheckCluster)
        if not self._checks.acquire(blocking=False):
            raise PhloemError(ErrorKind.BACKPRESSURE, f"{MAX_CHECKS} cluster checks are running")
        threading.Thread(
            target=self._check, args=(message, call), name="phloem-cluster-check", daemon=True
        ).start()
        return DEFER

    def _check(self, message: CheckCluster, call: Call) -> None:
        try:
            call.reply(self.backend.check(message.timeout_s))
        except Exception as exc:
            log.exception("cluster_check_failed")
            call.fail(PhloemError(ErrorKind.CLUSTER_UNAVAILABLE, f"{type(exc).__name__}: {exc}"))
        finally:
            self._checks.release()


def cluster_factory(ctx: ServiceContext) -> ChildSpec | None:
    """The `cluster` service; None while the backend is local."""
    cfg = ctx.config.cluster
    if cfg.backend != "ray":
        return None
    if ctx.resources.cluster is None:
        ctx.resources.cluster = RayBackend(cfg)
    return ChildSpec(
        SERVICE_NAME,
        (ClusterService, (ctx,), {}),
        restart="permanent",
        shutdown=STOP_MARGIN_S,
    )


register_service(SERVICE_NAME, cluster_factory)
