"""The `cluster` service's messages (see `service`)."""

from __future__ import annotations

import msgspec

from phloem.cluster.backend import CHECK_TIMEOUT_S


class GetClusterStatus(msgspec.Struct, frozen=True, tag="status"):
    """The cluster's address, nodes, CPUs and calls in flight (`backend.ClusterStatus`)."""


class CheckCluster(msgspec.Struct, frozen=True, tag="check"):
    """Connectivity, and the configured modules importing on each node (`CheckReport`)."""

    timeout_s: float = msgspec.field(default=CHECK_TIMEOUT_S)

    def __post_init__(self) -> None:
        if not 1.0 <= self.timeout_s <= 600.0:
            raise ValueError("timeout_s must be between 1 and 600")


ClusterRequest = GetClusterStatus | CheckCluster
