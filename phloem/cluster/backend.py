"""`RayBackend`: the Ray connection, one worker pool per kind, and their launchers.

`connect()` imports Ray (the optional extra) and joins the cluster the config names —
`""` starts a local Ray instance for development, `"auto"` joins the one on this machine,
`ray://host:10001` goes through Ray Client — or reuses the process's connection when Ray
is already initialised (it then leaves it open on `shutdown`). `launcher(kind)` is the
`Launcher` that `call_in_child` and supervisors use for that kind's process children, or
None when the kind stays local. `shutdown()` kills every worker and every call in flight,
so no Ray actor of phloem's outlives the tree.

A worker may import only phloem, the modules of configured components
(`settings.configured_modules()`), `[cluster] modules` and `ship_modules` — the
allow-list sent with every call (see `worker`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shlex
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from phloem.base import logs
from phloem.base.logs import get_logger
from phloem.base.settings import configured_modules
from phloem.cluster import rayapi
from phloem.cluster.pool import WorkerPool
from phloem.cluster.remote import RemoteCall, encode_job
from phloem.cluster.settings import KINDS, ClusterConfig, Kind
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision.handle import ChildStartError
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import Launcher, Limits, ProcessTarget

log = get_logger("phloem.cluster")


class NodeInfo(msgspec.Struct, frozen=True):
    node_id: str
    address: str
    alive: bool
    cpus: float


class ClusterStatus(msgspec.Struct, frozen=True):
    """What `phloem status` shows of the cluster."""

    backend: str
    address: str = ""
    namespace: str = ""
    connected: bool = False
    remote: list[str] = msgspec.field(default_factory=list)
    nodes: list[NodeInfo] = msgspec.field(default_factory=list)
    cpus: float = 0.0
    cpus_available: float = 0.0
    in_flight: int = 0
    workers: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    # The GCS's host:port, the shell command that attaches `ray status` to this Ray
    # (with Ray's token settings when it uses token auth), and Ray's own session
    # directory (its logs are in `logs/` there); empty when Ray does not say (Ray Client).
    gcs_address: str = ""
    ray_status: str = ""
    session_dir: str = ""


class ModuleCheck(msgspec.Struct, frozen=True):
    node: str
    module: str
    ok: bool
    error: str = ""


class CheckReport(msgspec.Struct, frozen=True):
    """`phloem cluster check`: connectivity, and the configured modules on each node."""

    ok: bool
    status: ClusterStatus
    modules: list[ModuleCheck] = msgspec.field(default_factory=list)
    error: str = ""


class RayLauncher(Launcher):
    """Starts one kind's process targets as `RemoteCall`s on its pool."""

    where = "ray"

    def __init__(self, backend: RayBackend, pool: WorkerPool) -> None:
        self.backend = backend
        self.pool = pool

    def launch(
        self,
        target: ProcessTarget,
        *,
        name: str,
        limits: Limits | None,
        ready_timeout: float,
        title: str | None = None,
    ) -> RemoteCall:
        blob = encode_job(target, name)
        worker = self.pool.lease(name, min(ready_timeout, self.backend.config.ready_timeout_s))
        call = RemoteCall(name, worker, self.pool, limits.rss_cap if limits else None)
        caps = dataclasses.asdict(limits) if limits is not None else {}
        self.pool.track(call)
        try:
            ref = worker.actor.call.remote(
                call.token, blob, caps, self.backend.allowed_modules(), ready_timeout, title
            )
        except Exception as exc:
            self.pool.discard(worker)
            self.pool.forget(call)
            reason = ExitReason(ExitKind.EXCEPTION, error_type="ClusterError", message=str(exc))
            raise ChildStartError(reason, name) from None
        call._begin(ref)
        return call


class RayBackend:
    """See the module docstring."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._pools: dict[Kind, WorkerPool] = {}
        self._launchers: dict[str, RayLauncher] = {}
        self._owned = False
        self._connected = False
        self._gcs_address = ""
        self._ray_status = ""
        self._session_dir = ""
        # kills and spare starts, off Ray's callback threads (see `WorkerPool._helper`)
        self._helper_thread = ThreadPoolExecutor(1, thread_name_prefix="phloem-cluster-helper")

    # -- connection ----------------------------------------------------------------------

    def connect(self) -> None:
        """Join (or start) the cluster and build the pools; `cluster_unavailable` if not."""
        try:
            ray = rayapi.ray()
        except ImportError:
            raise PhloemError(
                ErrorKind.CLUSTER_UNAVAILABLE,
                "[cluster] backend = 'ray' needs the ray extra: pip install 'phloem[ray]'",
            ) from None
        from phloem.cluster.worker import CONCURRENCY_GROUPS, RemoteWorker

        logs.adopt_logger("ray")  # the daemon's: Ray's own lines as JSON, not plain text
        env = self.runtime_env()
        info: dict[str, Any] = {}
        if ray.is_initialized():
            self._owned = False
        else:
            # "local" makes Ray start an instance of its own even when another runs here
            address = self.config.address or "local"
            try:
                context = ray.init(
                    address=address,
                    namespace=self.config.namespace,
                    runtime_env=env or None,
                    log_to_driver=False,
                    include_dashboard=False if address == "local" else None,
                    configure_logging=False,
                )
            except Exception as exc:
                raise PhloemError(
                    ErrorKind.CLUSTER_UNAVAILABLE,
                    f"cannot reach the Ray cluster at {self.config.address or '(local)'}: {exc}",
                ) from None
            self._owned = True
            info = dict(getattr(context, "address_info", None) or {})
        self._gcs_address, self._session_dir = _ray_addresses(ray, info)
        self._ray_status = ray_status_command(self._gcs_address, os.environ)
        actor_class = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(RemoteWorker)
        with self._lock:
            for kind in KINDS:
                if kind not in self.config.remote:
                    continue
                pool = WorkerPool(
                    kind,
                    self.config.resources_of(kind),
                    actor_class,
                    env or None,
                    self._helper_thread,
                )
                self._pools[kind] = pool
                self._launchers[kind] = RayLauncher(self, pool)
            self._connected = True
            if self.config.warm_at_start:
                for pool in self._pools.values():
                    pool.warm_now()
        log.info(
            "cluster_connected",
            address=self.config.address or "(local)",
            namespace=self.config.namespace,
            remote=list(self._pools),
            owned=self._owned,
            gcs_address=self._gcs_address,
            session_dir=self._session_dir,
        )

    def shutdown(self) -> None:
        """Kill every call in flight and every worker; disconnect if we connected."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
            self._launchers = {}
            connected, self._connected = self._connected, False
        for pool in pools:
            for call in pool.close():
                call.kill()
        self._helper_thread.shutdown(wait=True)
        if connected and self._owned:
            ray = rayapi.ray()
            ray.shutdown()
        log.info("cluster_stopped")

    # -- placement -----------------------------------------------------------------------

    def launcher(self, kind: str) -> RayLauncher | None:
        """The launcher of `kind`'s process children; None: they run locally."""
        with self._lock:
            return self._launchers.get(kind)

    def allowed_modules(self) -> list[str]:
        """What a worker may import (sent with every call; see the module docstring)."""
        names = configured_modules() | set(self.config.modules) | set(self.config.ship_modules)
        return sorted(names)

    def runtime_env(self) -> dict[str, Any]:
        """The config's `runtime_env`, with `ship_modules` added as `py_modules`."""
        env = dict(self.config.runtime_env)
        if self.config.ship_modules:
            shipped = list(env.get("py_modules") or [])
            shipped.extend(package_dir(name) for name in self.config.ship_modules)
            env["py_modules"] = shipped
        return env

    # -- operations ----------------------------------------------------------------------

    def status(self) -> ClusterStatus:
        address = self.config.address or "(local)"
        remote = [str(kind) for kind in self.config.remote]
        with self._lock:
            pools = dict(self._pools)
            connected = self._connected
        if not connected:
            return ClusterStatus("ray", address, self.config.namespace, remote=remote)
        ray = rayapi.ray()
        nodes = [
            NodeInfo(
                str(n["NodeID"]),
                str(n.get("NodeManagerAddress", "")),
                bool(n.get("Alive")),
                float(n.get("Resources", {}).get("CPU", 0.0)),
            )
            for n in ray.nodes()
        ]
        available = ray.available_resources().get("CPU", 0.0)
        return ClusterStatus(
            "ray",
            address,
            self.config.namespace,
            connected=True,
            remote=remote,
            nodes=nodes,
            cpus=sum(n.cpus for n in nodes if n.alive),
            cpus_available=float(available),
            in_flight=sum(p.in_flight() for p in pools.values()),
            workers={kind: pool.counts() for kind, pool in pools.items()},
            gcs_address=self._gcs_address,
            ray_status=self._ray_status,
            session_dir=self._session_dir,
        )

    def check(self, timeout: float) -> CheckReport:
        """Connectivity, and that the configured modules import on a worker of each node."""
        status = self.status()
        if not status.connected:
            return CheckReport(False, status, error="not connected")
        ray = rayapi.ray()
        from phloem.cluster.worker import RemoteWorker

        modules = self.allowed_modules()
        env = self.runtime_env() or None
        checks: list[ModuleCheck] = []
        error = ""
        for node in (n for n in status.nodes if n.alive):
            options: dict[str, Any] = {
                "num_cpus": 0,
                "max_restarts": 0,
                "scheduling_strategy": rayapi.node_affinity(node.node_id),
            }
            if env:
                options["runtime_env"] = env
            actor: Any = ray.remote(RemoteWorker).options(**options).remote([])
            where = f"{node.address}/{node.node_id[:8]}"
            try:
                result: dict[str, str] = ray.get(actor.check.remote(modules), timeout=timeout)
            except Exception as exc:
                error = f"no worker answered on {where}: {type(exc).__name__}: {exc}"[:500]
                break
            finally:
                ray.kill(actor, no_restart=True)
            checks.extend(ModuleCheck(where, m, not why, why) for m, why in result.items())
        ok = not error and bool(status.nodes) and all(c.ok for c in checks)
        return CheckReport(ok, status, checks, error)


def _ray_addresses(ray: Any, info: dict[str, Any]) -> tuple[str, str]:
    """The GCS address and Ray's session directory: from what `ray.init` answered, else
    from the connection's runtime context (a Ray this process had already joined)."""
    gcs = str(info.get("gcs_address") or "")
    session = str(info.get("session_dir") or "")
    if not gcs:
        try:
            gcs = str(ray.get_runtime_context().gcs_address or "")
        except Exception:  # Ray Client: the driver has no GCS address of its own
            gcs = ""
    return gcs, session


def ray_status_command(gcs_address: str, environ: Mapping[str, str]) -> str:
    """The shell command that runs `ray status` against `gcs_address` ('' without one).
    A Ray with token authentication (`RAY_AUTH_MODE=token` in the daemon's environment,
    set by Ray itself when it turned it on) answers only a CLI in that mode too; its
    token file is Ray's default (`~/.ray/auth_token`) unless `RAY_AUTH_TOKEN_PATH` says."""
    if not gcs_address:
        return ""
    words = []
    if environ.get("RAY_AUTH_MODE", "").lower() == "token":
        words.append("RAY_AUTH_MODE=token")
        if environ.get("RAY_AUTH_TOKEN_PATH"):
            words.append(f"RAY_AUTH_TOKEN_PATH={shlex.quote(environ['RAY_AUTH_TOKEN_PATH'])}")
    return " ".join([*words, "ray", "status", "--address", shlex.quote(gcs_address)])


def package_dir(name: str) -> str:
    """The local directory of package `name` (what Ray's `py_modules` ships)."""
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise PhloemError(
            ErrorKind.CONFIG_INVALID,
            f"cluster.ship_modules: {name!r} is not a package found here (a directory with "
            "__init__.py)",
        )
    return str(Path(locations[0]).resolve())
