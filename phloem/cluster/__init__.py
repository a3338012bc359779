"""Scale-out: process children of chosen kinds run on a Ray cluster (`[cluster]`).

- `settings`: the `[cluster]` section (backend, address, namespace, kinds, resources).
- `backend.RayBackend`: the connection, one `pool.WorkerPool` per kind, their launchers.
- `remote.RemoteCall`: one process target on a pooled worker, as a phloem child.
- `worker.RemoteWorker`: what runs on a Ray worker (allow-listed calls only).
- `service`: the `cluster` service that owns the backend; `protocol`: its messages.

A feature finds where its process children run with `ServiceContext.resources.launcher(kind)`;
nothing here imports Ray, so the local backend costs nothing.
"""
