"""Fixtures: a 2-node Ray cluster on this machine (`ray.cluster_utils.Cluster`), started
once for the package, and trees on either backend — the same tests run on both.

The Ray connection is made here, in the test process; a tree whose `[cluster]` says
`ray` then reuses it (as an embedding service that already uses Ray would).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from phloem import Tree
from phloem.cluster.settings import Kind
from phloem.config import Config
from tests.raycluster import assert_no_leaks, cluster_section, warm_up

PLANNERS = {"scripted": "tests.actors.planning.adapters:ScriptedPlanner"}
EXECUTORS = {"scripted": "tests.actors.planning.adapters:ScriptedExecutor"}
MIB = 1024 * 1024


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
def tree(backend: str, request: pytest.FixtureRequest) -> Iterator[Tree]:
    """A tree on `backend`; on Ray, with a worker of each kind its test names with
    `@pytest.mark.warm(kind, ...)` started first, so that a test's short timeouts measure
    its calls, not Ray starting a kind's first worker on a loaded machine."""
    t = Tree.start(tree_config(backend))
    try:
        marker = request.node.get_closest_marker("warm")
        warm(t, *(marker.args if marker is not None else ()))
        yield t
    finally:
        t.stop()
    if backend == "ray":
        assert_no_leaks()


def warm(tree: Tree, *kinds: Kind) -> None:
    """Run one short call of each of `kinds` on the tree's cluster (nothing locally)."""
    for kind in kinds:
        warm_up(tree.resources.launcher(kind), kind)
