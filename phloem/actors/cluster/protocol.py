"""The `cluster` service's messages (see `service`)."""

from __future__ import annotations

import msgspec

CHECK_TIMEOUT_S = 60.0
"""How long `cluster check` waits for a node's worker to start and import the modules."""
CHECK_TIMEOUT_RANGE = (1.0, 600.0)  # the check timeouts accepted, in seconds


class GetClusterStatus(msgspec.Struct, frozen=True, tag="status"):
    """The cluster's address, nodes, CPUs and calls in flight (`backend.ClusterStatus`)."""


class CheckCluster(msgspec.Struct, frozen=True, tag="check"):
    """Connectivity, and the configured modules importing on each node (`CheckReport`)."""

    timeout_s: float = msgspec.field(default=CHECK_TIMEOUT_S)

    def __post_init__(self) -> None:
        low, high = CHECK_TIMEOUT_RANGE
        if not low <= self.timeout_s <= high:
            raise ValueError(f"timeout_s must be between {low:g} and {high:g}")


ClusterRequest = GetClusterStatus | CheckCluster
