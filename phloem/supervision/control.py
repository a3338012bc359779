"""Start, stop or restart a supervisor's child by its tree path (`phloem start|stop|restart`).

A path is what `phloem tree` prints: child ids from the root down, `/`-separated, with
the root's own name allowed in front (`planning/service`, `phloem/planning/service`).
Each action is one call to the child's supervisor, in supervisorctl's words:

- `stop`: `terminate_child`. A kept child (permanent, transient) stays `stopped` until
  started, whatever its siblings do; a dynamic or temporary child (a run) is gone
  (`removed`). Stopping a child that is not running is `not_running`.
- `start`: `restart_child` of a stopped child (`already_started` if it runs; a dynamic
  child cannot be started by path: `simple_one_for_one`).
- `restart`: stop it if it runs, then start it from its spec (`SupervisorRef.restart`).

None of them counts against the supervisor's restart intensity: they are asked for, not
failures. The root cannot be controlled by path (`not_controllable`: stopping it is
stopping the daemon, which `phloem stop` does); a path that names no supervisor's child
is `unknown_child`. Nothing here serves connections: the daemon's socket, its accept
loop and its connections live outside the tree, so every child may be stopped.
"""

from __future__ import annotations

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.wire import CHILD_ACTIONS, MAX_ACTOR_PATH_CHARS, ChildControlled
from phloem.supervision.handle import ChildHandle
from phloem.supervision.owners import MAX_PATH_DEPTH as MAX_DEPTH
from phloem.supervision.supervisor import ChildInfo, SupervisorRef


def split_path(root: SupervisorRef, path: str) -> list[str]:
    """`path`'s child ids below `root` (empty for the root itself)."""
    if not isinstance(path, str) or len(path) > MAX_ACTOR_PATH_CHARS:
        raise PhloemError(ErrorKind.UNKNOWN_CHILD, "a tree path is a string of ids")
    parts = [p for p in path.strip("/").split("/") if p]
    return parts[1:] if parts and parts[0] == root.name else parts


def locate(root: SupervisorRef, path: str) -> tuple[SupervisorRef, ChildInfo]:
    """The supervisor of the child at `path` and that child's row (the path is at most
    `MAX_ACTOR_PATH_CHARS` long, and the walk ends where the tree does)."""
    parts = split_path(root, path)
    if not parts:
        raise PhloemError(
            ErrorKind.NOT_CONTROLLABLE,
            f"{root.name!r} is the tree's root: stop the daemon with `phloem stop`",
        )
    node: ChildHandle = root
    for depth, part in enumerate(parts):
        if not isinstance(node, SupervisorRef) or not node.is_alive():
            break
        info = next((i for i in node.which_children() if i.id == part), None)
        if info is None:
            break
        if depth == len(parts) - 1:
            return node, info
        if info.ref is None:
            break
        node = info.ref
    raise PhloemError(ErrorKind.UNKNOWN_CHILD, f"no supervisor's child at {path[:80]!r}")


def control_child(root: SupervisorRef, action: str, path: str, timeout: float) -> ChildControlled:
    """Do `action` to the child at `path`; what it did (see the module docstring)."""
    if action not in CHILD_ACTIONS:
        raise PhloemError(
            ErrorKind.INVALID_ARGUMENT, f"action must be one of {', '.join(CHILD_ACTIONS)}"
        )
    sup, info = locate(root, path)
    before = info.ref
    where = "/".join(split_path(root, path))
    dynamic = sup.spec.strategy == "simple_one_for_one"
    try:
        if action == "stop":
            sup.stop_child(before if dynamic and before is not None else info.id, timeout=timeout)
        elif action == "start":
            sup.restart_child(info.id, timeout=timeout)
        else:
            sup.restart(info.id, timeout=timeout)
    except PhloemError as err:
        raise _said_of(err, where) from None
    after = next((i for i in sup.which_children() if i.id == info.id), None)
    state = "removed" if after is None else after.state
    handle = None if after is None or after.ref is None else after.ref
    return ChildControlled(
        path=where,
        action=action,
        state=state,
        handle=None if handle is None else handle.handle_id,
        pid=None if after is None else after.pid,
        previous=None if before is None else before.handle_id,
        previous_pid=info.pid,
    )


def _said_of(err: PhloemError, where: str) -> PhloemError:
    """The supervisor's error about one child, said of its path."""
    if err.kind == ErrorKind.NOT_RUNNING:
        return PhloemError(ErrorKind.NOT_RUNNING, f"{where} is not running")
    if err.kind == ErrorKind.RUNNING:  # a start that met a running child
        return PhloemError(ErrorKind.ALREADY_STARTED, f"{where} is already running")
    if err.kind == ErrorKind.NOT_FOUND:  # it went while we looked
        return PhloemError(ErrorKind.UNKNOWN_CHILD, f"no supervisor's child at {where!r}")
    return err


def stopped_paths(root: SupervisorRef, limit: int) -> list[str]:
    """Paths of the children stopped by hand (state `stopped`), at most `limit`."""
    found: list[str] = []

    def walk(sup: SupervisorRef, prefix: str, depth: int) -> None:
        for child in sup._sup.children_view():
            if len(found) >= limit:
                return
            where = f"{prefix}{child.spec.id}"
            if child.stopped and not child.running:
                found.append(where)
            handle = child.handle
            if isinstance(handle, SupervisorRef) and handle.is_alive() and depth < MAX_DEPTH:
                walk(handle, where + "/", depth + 1)

    walk(root, "", 0)
    return found
