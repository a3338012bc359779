"""A Ray cluster on this machine for the tests (`ray.cluster_utils.Cluster`, 2 nodes of
2 CPUs), the backend that reuses its connection, and the leak check (Ray's state API).

The suite starts one cluster for the whole Ray run (the session's `ray_cluster`
fixture, `tests/conftest.py`), stopped at its end, so no Ray process outlives it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from phloem.cluster.settings import KINDS, Kind

NAMESPACE = "phloem-test"
LEAK_WAIT_S = 30.0
WARM_TIMEOUT_S = 120.0
"""How long `warm` waits for a kind's first worker (a loaded machine starts one slowly)."""

_address: list[str] = []  # the running test cluster's, for the state API


def start_cluster() -> Any:
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(
        address=cluster.address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False
    )
    _address[:] = [cluster.address]
    return cluster


def stop_cluster(cluster: Any) -> None:
    import ray

    _address.clear()
    ray.shutdown()
    cluster.shutdown()


def cluster_fixture() -> Iterator[Any]:
    """The body of the session's `ray_cluster` fixture."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def live_workers() -> list[Any]:
    """Phloem's Ray actors that are not dead, and actor tasks still running (state API)."""
    from ray.util.state import list_actors, list_tasks

    where = _address[0] if _address else None
    actors = list_actors(
        address=where,
        filters=[("class_name", "=", "RemoteWorker"), ("state", "!=", "DEAD")],
    )
    tasks = list_tasks(
        address=where, filters=[("type", "=", "ACTOR_TASK"), ("state", "=", "RUNNING")]
    )
    return [*actors, *tasks]


def assert_no_leaks() -> None:
    """No phloem worker or call is left on the cluster (waits for Ray's async kills)."""
    deadline = time.monotonic() + LEAK_WAIT_S
    while (left := live_workers()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"leaked on the cluster: {left}"


def cluster_section(backend: str, **extra: Any) -> dict[str, Any]:
    """A `[cluster]` section for a test tree (the Ray one reuses the test connection)."""
    if backend == "local":
        return {"backend": "local"}
    # a quarter CPU per worker: several test trees' pools fit the 4 CPUs of the cluster
    small = {"num_cpus": 0.25}
    return {
        "backend": "ray",
        "namespace": NAMESPACE,
        "modules": ["tests"],
        "ready_timeout_s": 120,
        "resources": {kind: dict(small) for kind in KINDS},
        **extra,
    }


def ray_backend(*warm_kinds: Kind, **extra: Any) -> Any:
    """A connected `RayBackend` on the test cluster (shut it down after use), with a
    worker of each of `warm_kinds` started: a test's short call timeout then measures
    the call, not Ray starting its first worker."""
    from phloem.cluster.backend import RayBackend
    from phloem.cluster.settings import ClusterConfig

    backend = RayBackend(msgspec.convert(cluster_section("ray", **extra), ClusterConfig))
    backend.connect()
    try:
        for kind in warm_kinds:
            warm_up(backend.launcher(kind), kind)
    except BaseException:
        backend.shutdown()
        raise
    return backend


def warm_up(launcher: Any, kind: Kind) -> None:
    """One short call of `kind` through `launcher` (None: local, nothing to do), waiting
    up to `WARM_TIMEOUT_S` for its first worker."""
    if launcher is None:
        return
    from phloem.supervision.childcall import call_in_child

    value = call_in_child(
        echo, kind, name=f"warm-{kind}", launcher=launcher, timeout=WARM_TIMEOUT_S
    )
    assert value == kind


def echo(value: Any) -> Any:
    """`value` (a call a worker runs to show it has started)."""
    return value
