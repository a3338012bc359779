"""Who a process child belongs to, and what `ps` calls it.

Supervisors list the children their specs start. Every other process child — a call's
child (`childcall`), a command (the `bash` tool), a remote call on a cluster worker — is
started by some actor for its work, and is listed under that actor, its *owner*, in
`phloem tree` from its start until it ends (`ChildHandle.attach`). The owner is found,
not passed: an actor's own thread has the actor as its owner (`Actor` sets it around
its loop), a thread an actor starts for its work takes the actor along with
`carry(fn)`, and `owned_by(owner)` sets one for a block. `start_process` and
`childcall` attach what they start to `current_owner()`; with none (a script, a test, a
supervisor starting its own children) nothing is attached.

Log records are attributed the same way (`current_actor_path`, the `actor_path` field
of every record: `phloem.base.logs`): to the owner of the thread's work, else to the actor
whose loop the thread runs (a supervisor's, which owns no work).

Each process child is titled (`setproctitle`, set in the child before user code runs),
so `ps` says what it is: `phloem: <where>`, where `where` is the owner's place in the tree
and the child's name (`planning/runs/planning-run-7 executor.execute`) or, for a
supervisor's child, its path (`mcp/servers/files`). Titles hold tree ids and configured
names only (never arguments or user content), at most `MAX_TITLE_CHARS`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from phloem.base import logs

if TYPE_CHECKING:
    from phloem.supervision.handle import ChildHandle

P = ParamSpec("P")
R = TypeVar("R")

TITLE_PREFIX = "phloem: "
MAX_TITLE_CHARS = 200
"""Longest process title (longer ones are cut): ids and names, not a command line."""
MAX_PATH_DEPTH = 64
"""Most tree levels a title's path names (as `snapshot.MAX_SNAPSHOT_DEPTH`)."""

_owner: contextvars.ContextVar[ChildHandle | None] = contextvars.ContextVar(
    "phloem_owner", default=None
)


_actor: contextvars.ContextVar[ChildHandle | None] = contextvars.ContextVar(
    "phloem_actor", default=None
)


def set_current_actor(actor: ChildHandle | None) -> None:
    """The actor whose loop the calling thread runs (an actor's loop, in its own context):
    what its log records are attributed to when the thread works for no owner."""
    _actor.set(actor)


def current_actor_path() -> str | None:
    """The tree path log records made here are attributed to (None: no actor's)."""
    node = _owner.get() or _actor.get()
    return None if node is None else tree_path(node)


def current_owner() -> ChildHandle | None:
    """The handle the calling thread works for (None: nobody's work)."""
    return _owner.get()


def set_current_owner(owner: ChildHandle | None) -> None:
    """Make `owner` the owner of the calling thread's work from now on (an actor's loop,
    which runs in a context of its own)."""
    _owner.set(owner)


def enter_actor(actor: ChildHandle | None, owns_work: bool) -> None:
    """`set_current_actor(actor)`, and `set_current_owner(actor)` if it `owns_work`: what
    an actor's loop does first, in its own context."""
    _actor.set(actor)
    if owns_work:
        _owner.set(actor)


@contextlib.contextmanager
def owned_by(owner: ChildHandle | None) -> Iterator[None]:
    """Within the block, process children started here belong to `owner`."""
    token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(token)


def carry(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, run with the caller's owner: for a thread or pool job an actor starts for its
    work (a plain thread does not inherit it)."""
    owner = current_owner()

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with owned_by(owner):
            return fn(*args, **kwargs)

    return run


def attach_to_owner(child: ChildHandle) -> None:
    """List `child` under the calling thread's owner while it lives (if there is one)."""
    owner = current_owner()
    if owner is not None and owner is not child:
        owner.attach(child)


def _below_root(handle: ChildHandle) -> list[str]:
    """The names from the root's child down to `handle` (empty for a root itself)."""
    names: list[str] = []
    node = handle
    while node._parent is not None and len(names) < MAX_PATH_DEPTH:
        names.append(node.name)
        node = node._parent
    return names[::-1]


def tree_path(handle: ChildHandle) -> str:
    """`handle`'s place in the tree: its name and its supervisors', below the root's
    (a root's is its own name)."""
    return "/".join(_below_root(handle)) or handle.name


def path_under(parent: ChildHandle, name: str) -> str:
    """The place in the tree of a child `name` of `parent`."""
    return "/".join([*_below_root(parent), name])


def title(where: str) -> str:
    """The process title for `where`: printable, on one line, at most `MAX_TITLE_CHARS`."""
    clean = "".join(ch if ch.isprintable() else " " for ch in where).strip()
    return (TITLE_PREFIX + clean)[:MAX_TITLE_CHARS]


def child_title(name: str, owner: ChildHandle | None = None) -> str:
    """The title of a process child `name` started for `owner` (default: the current
    one): `phloem: <owner's path> <name>`, or `phloem: <name>` for nobody's."""
    owner = owner if owner is not None else current_owner()
    return title(name if owner is None else f"{tree_path(owner)} {name}")


logs.set_actor_source(current_actor_path)
