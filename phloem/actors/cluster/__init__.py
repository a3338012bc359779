"""Scale-out: process children of chosen kinds run on a Ray cluster (`[cluster]`).

- `settings`: the `[cluster]` section (backend, address, namespace, kinds, resources).
- `backend.RayBackend`: the connection, one `pool.WorkerPool` per kind, their launchers.
- `remote.RemoteCall`: one process target on a pooled worker, as a phloem child.
- `worker.RemoteWorker`: what runs on a Ray worker (allow-listed calls only).
- `service`: the `cluster` service that owns the backend; `protocol`: its messages.

`launcher_of(shared, kind)` is how a feature finds where its process children run; it
never imports Ray, so the local backend costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phloem.actors.cluster.settings import Kind
from phloem.supervision.spec import Launcher


def launcher_of(shared: Mapping[str, Any], kind: Kind) -> Launcher | None:
    """The launcher of `kind`'s process children in a tree (its `shared` dict); None
    when they run locally (backend `local`, or the kind not in `[cluster] remote`)."""
    backend = shared.get("cluster")
    if backend is None:
        return None
    launcher: Launcher | None = backend.launcher(kind)
    return launcher
