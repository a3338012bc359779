"""Cluster methods of `phloem.Client` (daemon socket and `tree.client()` alike).

`cluster_status()` answers the `cluster` service's `ClusterStatus` as a dict (address,
nodes, CPUs, workers per kind, calls in flight), or `{"backend": "local"}` when the tree
runs every process child locally. `cluster_check()` verifies the connection and that the
configured modules import on a worker of every node; with the local backend it raises
`cluster_unavailable`.
"""

from __future__ import annotations

from typing import Any

from phloem.actors.cluster.protocol import CHECK_TIMEOUT_S, CheckCluster, GetClusterStatus
from phloem.client.base import AsyncClientBase, ClientBase
from phloem.protocols.errors import ErrorKind, PhloemError

CLUSTER_SERVICE = "cluster"
REQUEST_SLACK_S = 10.0
LOCAL: dict[str, Any] = {"backend": "local"}


def _local(err: PhloemError, what: str) -> PhloemError:
    if err.kind == ErrorKind.UNKNOWN_ACTOR:
        return PhloemError(
            ErrorKind.CLUSTER_UNAVAILABLE, f"{what}: the backend is local ([cluster] backend)"
        )
    return err


class ClusterMethods(ClientBase):
    def cluster_status(self) -> dict[str, Any]:
        """The cluster's status (see the module docstring)."""
        try:
            return dict(self.ask(CLUSTER_SERVICE, GetClusterStatus()))
        except PhloemError as err:
            if err.kind == ErrorKind.UNKNOWN_ACTOR:
                return dict(LOCAL)
            raise

    def cluster_check(self, timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, Any]:
        """Connectivity and module imports on every node (see the module docstring)."""
        try:
            reply = self.ask(
                CLUSTER_SERVICE, CheckCluster(timeout_s), timeout=timeout_s + REQUEST_SLACK_S
            )
        except PhloemError as err:
            raise _local(err, "cluster check") from None
        return dict(reply)


class AsyncClusterMethods(AsyncClientBase):
    async def cluster_status(self) -> dict[str, Any]:
        """The cluster's status (see the module docstring)."""
        try:
            return dict(await self.ask(CLUSTER_SERVICE, GetClusterStatus()))
        except PhloemError as err:
            if err.kind == ErrorKind.UNKNOWN_ACTOR:
                return dict(LOCAL)
            raise

    async def cluster_check(self, timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, Any]:
        """Connectivity and module imports on every node (see the module docstring)."""
        try:
            reply = await self.ask(
                CLUSTER_SERVICE, CheckCluster(timeout_s), timeout=timeout_s + REQUEST_SLACK_S
            )
        except PhloemError as err:
            raise _local(err, "cluster check") from None
        return dict(reply)
