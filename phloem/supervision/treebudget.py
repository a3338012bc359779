"""The address-space budget of a capped tree: what bounds a burst the watchdog cannot see.

The RSS watchdog (`watchdog`) reads a capped child's tree every 0.1 s (0.02 s near its
cap) and kills it over its cap, but helpers that allocate in parallel can outrun any
reading (a callback forking 8 helpers was seen at 6.5 times its cap before the kill). So
the tree's growth between two readings is bounded in the kernel, with each member's soft
`RLIMIT_AS` (its hard limit stays the cap):

- at each reading, the watchdog hands the tree's budget, `MAX_BURST_FACTOR` times
  the cap less what the tree holds, out to its members in equal shares: each may map its
  share beyond what it mapped at the reading (`share_budget`);
- a process of the tree that forks (`os.fork`, `multiprocessing`) splits its own share
  with the new child: half each (`split_on_fork`, installed in the capped child before
  user code and inherited by every Python process it forks). A fork never adds budget.

A page must be mapped before it is resident, so between two readings the tree can grow
by at most its budget: it maps at most `MAX_BURST_FACTOR` times its cap, and the
watchdog kills it over the cap at the next reading. A member that maps past its share
gets `ENOMEM` (`MemoryError` in Python), as a single process does at its `RLIMIT_AS`.

Edges: one allocation larger than a member's share fails even though the tree as a whole
has room (in a tree of n processes a share is `(MAX_BURST_FACTOR * cap - held) / n`);
a program started by exec, or forked from C code, starts with its parent's whole share
until the next reading; address space mapped before a reading but not yet resident (a
thread's malloc arena) fills without a new mapping, and copy-on-write pages a helper
writes to grow the tree without any: the watchdog sees both at its next reading; a
member's own lower soft limit is raised to its share at the next reading. Used
only for a tree whose cap is `Limits.max_memory_bytes` (the address-space cap):
`max_rss_bytes` trees have no `RLIMIT_AS` to share.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Mapping

from phloem.supervision.proctree import limit_address_space, vm_of

MAX_BURST_FACTOR = 1.25
"""A capped tree may map at most this many times its cap between two readings. What grows
without a mapping (copy-on-write copies, reserved arenas) comes on top: the overshoot
goal, 1.5 times the cap, leaves it room."""


def share_budget(mapped: Mapping[int, int], cap: int, held: int) -> int:
    """Give each member (pid -> bytes it mapped at the reading) an equal share of the
    tree's budget (`MAX_BURST_FACTOR` times `cap`, less `held`: the tree's reading)
    beyond what it mapped then, so that what it mapped since counts against the share
    too; the share, in bytes."""
    share = max(0, int(cap * MAX_BURST_FACTOR) - held) // max(1, len(mapped))
    for pid, vm in mapped.items():
        limit_address_space(pid, vm + share)
    return share


def split_on_fork() -> None:
    """In a capped child: from now on, each fork splits the forking process's share of
    the budget in half with its new child (see the module docstring). Both halves are
    worked out after the fork from what the two then have alike (the soft limit and the
    mapped size), so no state passes between the hooks and concurrent forks of two
    threads split correctly."""
    os.register_at_fork(
        after_in_parent=lambda: _keep(lambda share: share - share // 2),
        after_in_child=lambda: _keep(lambda share: share // 2),
    )


def _keep(part: Callable[[int], int]) -> None:
    """Set this process's share to `part` of the share it has now."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    vm = vm_of(os.getpid())
    if soft != resource.RLIM_INFINITY and vm is not None:
        limit_address_space(os.getpid(), vm + part(max(0, soft - vm)))
