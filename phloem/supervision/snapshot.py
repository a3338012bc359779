"""`tree_snapshot()`: a frozen, JSON-ready picture of every supervisor and child.

Snapshots read each supervisor's child list under its lock instead of asking the
supervisor actor, so taking one never waits on a supervisor that is busy restarting or
stopping children. Under each node come the process children started for its work
(`owners`: a run's callback, a bash command, a bridge's server), read from the handles
when the snapshot is taken. This is what `phloem tree`, `status` and `top` render.
"""

from __future__ import annotations

import os
import threading
import time

import psutil

from phloem.protocols.snapshot import NodeSnapshot, TreeSnapshot
from phloem.supervision.handle import ChildHandle, ChildState
from phloem.supervision.spec import Command, ProcessTarget, RemoteTarget, SupervisorChild
from phloem.supervision.supervisor import SupervisorRef, _child_info, root_supervisors

MAX_SNAPSHOT_DEPTH = 64  # nesting of supervisors a snapshot follows
MAX_LISTED_PROCESSES = 32
"""Process children attached to one node (`owners`) that a snapshot lists; the rest are
counted in its `unlisted_processes`."""


class _ThreadTimes:
    """The CPU time of each of this process's threads, read once per snapshot (on first
    use: one read of /proc for all actors)."""

    def __init__(self) -> None:
        self._times: dict[int, float] | None = None

    def of(self, native_id: int | None) -> float | None:
        if native_id is None:
            return None
        if self._times is None:
            try:
                threads = psutil.Process().threads()
            except psutil.Error:
                threads = []
            self._times = {t.id: t.user_time + t.system_time for t in threads}
        return self._times.get(native_id)


def _node(
    handle: ChildHandle,
    child_id: str,
    kind: str,
    restarts: int,
    depth: int,
    threads: _ThreadTimes,
) -> NodeSnapshot:
    stats = handle.stats()
    children: list[NodeSnapshot] = []
    strategy = None
    if isinstance(handle, SupervisorRef) and handle.is_alive() and depth < MAX_SNAPSHOT_DEPTH:
        strategy = str(handle.spec.strategy)
        for child in handle._sup.children_view():
            info = _child_info(child)
            if info.ref is not None:
                children.append(
                    _node(info.ref, info.id, info.kind, info.restarts, depth + 1, threads)
                )
            else:
                children.append(
                    NodeSnapshot(
                        id=info.id,
                        kind=info.kind,
                        type=_start_type(child.spec.start),
                        state=info.state,
                        restarts=info.restarts,
                    )
                )
    unlisted = 0
    if depth < MAX_SNAPSHOT_DEPTH:
        attached = handle.attached()
        unlisted = max(0, len(attached) - MAX_LISTED_PROCESSES)
        for proc in attached[:MAX_LISTED_PROCESSES]:
            children.append(_node(proc, proc.name, "worker", 0, depth + 1, threads))
    return NodeSnapshot(
        id=child_id,
        kind=kind,
        type=handle.kind,
        state=handle.state.value,
        restarts=restarts,
        handle=handle.handle_id,
        pid=stats.pid,
        thread=stats.thread,
        mailbox_depth=stats.mailbox_depth,
        credit_in_use=stats.credit_in_use,
        rss_bytes=stats.rss_bytes,
        strategy=strategy,
        children=children,
        rss_cap_bytes=stats.rss_cap_bytes,
        tree_rss_bytes=stats.tree_rss_bytes,
        tree_processes=stats.tree_processes,
        node=stats.node,
        unlisted_processes=unlisted,
        cpu_s=stats.cpu_s if stats.cpu_s is not None else threads.of(stats.native_thread),
    )


def _start_type(start: object) -> str:
    if isinstance(start, SupervisorChild):
        return "supervisor"
    if isinstance(start, ProcessTarget | Command | RemoteTarget):
        return "process"
    return "actor"


def snapshot_of(root: SupervisorRef, threads: _ThreadTimes | None = None) -> NodeSnapshot:
    """The subtree under one supervisor."""
    return _node(root, root.name, "supervisor", 0, 0, threads or _ThreadTimes())


def tree_snapshot(roots: list[SupervisorRef] | None = None) -> TreeSnapshot:
    """Snapshot the given supervisors (default: every running root supervisor)."""
    threads = _ThreadTimes()
    nodes = [snapshot_of(r, threads) for r in (roots if roots is not None else root_supervisors())]
    counts = {"actor": 0, "process": 0, "supervisor": 0}
    restarts = 0

    def walk(node: NodeSnapshot) -> None:
        nonlocal restarts
        if node.state not in (ChildState.UNDEFINED, ChildState.STOPPED):  # no incarnation
            counts[node.type] = counts.get(node.type, 0) + 1
        counts["process"] += node.unlisted_processes
        restarts += node.restarts
        for child in node.children:
            walk(child)

    for node in nodes:
        walk(node)
    return TreeSnapshot(
        taken_at=time.time(),
        pid=os.getpid(),
        rss_bytes=psutil.Process().memory_info().rss,
        threads=threading.active_count(),
        roots=nodes,
        actors=counts["actor"],
        processes=counts["process"],
        supervisors=counts["supervisor"],
        restarts=restarts,
    )
