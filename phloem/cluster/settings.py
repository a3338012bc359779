"""The `[cluster]` configuration section (gathered by `phloem.config`).

    [cluster]
    backend = "ray"                      # local (default: the fork server) | ray
    address = ""                         # "" starts a local Ray; "auto"; "ray://host:10001"
    namespace = "phloem"
    remote = ["planning_callbacks", "isolated_agents", "tools", "eval_cases"]
    modules = ["myapp.adapters"]         # importable on workers, besides configured code
    ship_modules = []                    # local packages sent to workers (runtime_env py_modules)
    ready_timeout_s = 60                 # longest wait for a worker (within the call's timeout)
    warm_at_start = false                # start each kind's warm_workers with the daemon

    [cluster.runtime_env]                # passed to Ray as the workers' runtime_env
    env_vars = { MY_FLAG = "1" }

    [cluster.resources.planning_callbacks]
    num_cpus = 1                         # Ray's scheduler: CPUs per worker of this kind
    memory = 0                           # bytes Ray reserves per worker (0: none)
    max_workers = 8                      # workers of this kind at once (the pool's bound)
    warm_workers = 1                     # idle workers kept started ahead of need
    custom_resources = {}                # Ray custom resources per worker, e.g. {gpu_box = 1}

Kinds not in `remote` stay in local process children. `ray` is an optional extra
(`pip install 'phloem[ray]'`); nothing imports it while `backend = "local"`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from phloem.base.settings import Section

Kind = Literal["planning_callbacks", "isolated_agents", "tools", "eval_cases"]
KINDS: tuple[Kind, ...] = ("planning_callbacks", "isolated_agents", "tools", "eval_cases")

ADDRESS_PATTERN = r"^$|^auto$|^ray://[A-Za-z0-9.:\[\]_-]+$|^[A-Za-z0-9.\[\]_-]+:[0-9]{1,5}$"
MODULE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
Module = Annotated[str, msgspec.Meta(pattern=MODULE_PATTERN, max_length=200)]
RUNTIME_ENV_KEYS = frozenset(
    {"env_vars", "pip", "uv", "py_modules", "working_dir", "excludes", "conda", "config"}
)
"""The `runtime_env` keys phloem passes on (Ray's own names)."""

MAX_WORKERS = 8
"""Default bound on the workers of one kind (each holds `num_cpus` of Ray's CPUs)."""
READY_TIMEOUT_S = 60.0
WARM_WORKERS = 1
"""Default number of idle workers of a kind kept ready."""


class KindResources(Section, kw_only=True):
    """`[cluster.resources.KIND]`: what Ray reserves for each worker of one kind."""

    num_cpus: Annotated[float, msgspec.Meta(ge=0, le=1024)] = 1.0  # CPUs Ray reserves per worker
    # Bytes of memory Ray reserves per worker (0: none).
    memory: Annotated[int, msgspec.Meta(ge=0, le=1 << 50)] = 0
    # Workers of this kind at once (one call each); a call waits for a free one.
    max_workers: Annotated[int, msgspec.Meta(ge=1, le=1024)] = MAX_WORKERS
    # Idle workers kept started ahead of need (within max_workers), so that a call, or
    # the one after a worker was killed, does not wait for a worker process to start.
    warm_workers: Annotated[int, msgspec.Meta(ge=0, le=1024)] = WARM_WORKERS
    # Ray custom resources each worker needs (e.g. {"gpu_box" = 1}): pins a kind to the
    # nodes that offer them.
    custom_resources: dict[
        Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")],
        Annotated[float, msgspec.Meta(gt=0, le=1_000_000)],
    ] = {}


class ClusterConfig(Section, kw_only=True):
    """`[cluster]`: where process children of each kind run (see the module docstring)."""

    # Where process children of the remote kinds run: the local fork server, or Ray.
    backend: Literal["local", "ray"] = "local"
    # The Ray cluster: "" starts a local Ray with the daemon; "auto" joins this machine's;
    # "ray://HOST:PORT" is Ray Client; "HOST:PORT" a GCS address.
    address: Annotated[str, msgspec.Meta(pattern=ADDRESS_PATTERN, max_length=255)] = ""
    # The Ray namespace the daemon connects in (its workers are created there).
    namespace: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = "phloem"
    # The kinds of process children that run on Ray (with backend = "ray"); others stay local.
    remote: Annotated[list[Kind], msgspec.Meta(max_length=4)] = msgspec.field(
        default_factory=lambda: list(KINDS)
    )
    # Modules importable on workers besides configured components (the unpickler's allow-list).
    modules: Annotated[list[Module], msgspec.Meta(max_length=256)] = []
    # Local packages Ray sends to the workers (runtime_env py_modules); allowed there too.
    ship_modules: Annotated[list[Module], msgspec.Meta(max_length=64)] = []
    # Longest wait of a call for a worker (within the call's own timeout); then
    # `child_timeout`.
    ready_timeout_s: Annotated[float, msgspec.Meta(ge=0.1, le=3600)] = READY_TIMEOUT_S
    # Start each remote kind's `warm_workers` when the backend connects, not at the kind's
    # first call: that call then finds a worker started (at the cost of holding each
    # kind's resources on the cluster from the start).
    warm_at_start: bool = False
    runtime_env: dict[str, Any] = {}  # Ray's runtime_env of the workers (env_vars, pip, ...)
    resources: dict[Kind, KindResources] = {}  # what Ray reserves per worker, by kind

    def __post_init__(self) -> None:
        unknown = sorted(set(self.runtime_env) - RUNTIME_ENV_KEYS)
        if unknown:
            raise ValueError(
                f"cluster.runtime_env: unknown key {unknown[0]!r} "
                f"(known: {', '.join(sorted(RUNTIME_ENV_KEYS))})"
            )
        if len(set(self.remote)) != len(self.remote):
            raise ValueError("cluster.remote: a kind is named twice")

    def resources_of(self, kind: Kind) -> KindResources:
        return self.resources.get(kind) or KindResources()

    def runs_remotely(self, kind: Kind) -> bool:
        return self.backend == "ray" and kind in self.remote
