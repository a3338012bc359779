"""Fixtures: a 2-node Ray cluster on this machine (`ray.cluster_utils.Cluster`), started
once for the package, and trees on either backend — the same tests run on both.

The Ray connection is made here, in the test process; a tree whose `[cluster]` says
`ray` then reuses it (as an embedding service that already uses Ray would).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from phloem import Tree
from phloem.config import Config

NAMESPACE = "phloem-test"
PLANNERS = {"scripted": "tests.actors.planning.adapters:ScriptedPlanner"}
EXECUTORS = {"scripted": "tests.actors.planning.adapters:ScriptedExecutor"}
MIB = 1024 * 1024
LEAK_WAIT_S = 30.0


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[Any]:
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
    try:
        yield cluster
    finally:
        _address.clear()
        ray.shutdown()
        cluster.shutdown()


_address: list[str] = []  # the test cluster's, for the state API (another may run here)


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
    if backend == "local":
        return {"backend": "local"}
    return {
        "backend": "ray",
        "namespace": NAMESPACE,
        "modules": ["tests"],
        "ready_timeout_s": 30,
        **extra,
    }


def tree_config(backend: str, cluster: dict[str, Any] | None = None) -> Config:
    return msgspec.convert(
        {
            "services": {"disabled": ["echo"]},
            "cluster": cluster or cluster_section(backend),
            "planning": {"planners": PLANNERS, "executors": EXECUTORS},
            "agents": {
                "functions": {
                    "add": {
                        "fn": "tests.actors.cluster.fns:add",
                        "input_keys": ["a", "b"],
                        "output_key": "out",
                        "isolate": True,
                    },
                    "sleeper": {
                        "fn": "tests.actors.cluster.fns:agent_sleep",
                        "input_keys": ["seconds", "fifo"],
                        "output_key": "out",
                        "isolate": True,
                        "timeout_s": 1.0,
                    },
                    "hog": {
                        "fn": "tests.actors.cluster.fns:agent_hog",
                        "input_keys": ["mib"],
                        "output_key": "out",
                        "isolate": True,
                        "max_memory_bytes": 128 * MIB,
                    },
                    "slow": {
                        "fn": "tests.actors.cluster.fns:agent_sleep",
                        "input_keys": ["seconds", "fifo"],
                        "output_key": "out",
                        "isolate": True,
                    },
                    "crash": {
                        "fn": "tests.actors.cluster.fns:agent_crash",
                        "input_keys": ["why"],
                        "output_key": "out",
                        "isolate": True,
                    },
                }
            },
        },
        Config,
    )


@pytest.fixture(params=["local", "ray"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
    name: str = request.param
    return name


@pytest.fixture
def tree(backend: str) -> Iterator[Tree]:
    t = Tree.start(tree_config(backend))
    try:
        yield t
    finally:
        t.stop()
    if backend == "ray":
        assert_no_leaks()
