"""The picture of a supervision tree that `phloem tree`, `status` and `top` render: what
the daemon answers `GetTree` with (`phloem.supervision.snapshot.tree_snapshot` takes it).
"""

from __future__ import annotations

import msgspec


class NodeSnapshot(msgspec.Struct, frozen=True):
    """One supervisor or child.

    `kind` is `supervisor` or `worker`; `type` is `supervisor`, `actor` or `process`;
    `pid` is set for process children (a remote one's is the pid of the process running
    it on `node`, its worker's until the worker has said), `thread` for actors and
    supervisors. `children` are a supervisor's children, then
    the process children started for the node's work (`owners`; at most
    `MAX_LISTED_PROCESSES`, the rest counted in `unlisted_processes`). A process
    child with a memory cap also has `rss_cap_bytes` (the cap on its whole tree's summed
    RSS, enforced by the RSS watchdog) and the watchdog's latest reading of that tree
    (`tree_rss_bytes`, `tree_processes`). `cpu_s` is the CPU time (user + system
    seconds) used so far by a process child's process or an actor's thread (None when
    unknown, as for a remote child): `phloem top` shows its change between two snapshots
    as CPU%.
    """

    id: str
    kind: str
    type: str
    state: str
    restarts: int = 0
    handle: str | None = None
    pid: int | None = None
    thread: str | None = None
    mailbox_depth: int = 0
    credit_in_use: int = 0
    rss_bytes: int | None = None
    strategy: str | None = None
    children: list[NodeSnapshot] = msgspec.field(default_factory=list)
    rss_cap_bytes: int | None = None
    tree_rss_bytes: int | None = None
    tree_processes: int | None = None
    node: str | None = None  # a remote process child's cluster node (`ip/node-id`)
    unlisted_processes: int = 0  # attached process children past MAX_LISTED_PROCESSES
    cpu_s: float | None = None


class TreeSnapshot(msgspec.Struct, frozen=True):
    """Every root supervisor of this process with its whole subtree, plus totals."""

    taken_at: float
    pid: int
    rss_bytes: int
    threads: int
    roots: list[NodeSnapshot]
    actors: int
    processes: int
    supervisors: int
    restarts: int
