"""Monitors and links, as in Erlang.

`monitor(target, watcher)` delivers one `Down` to the watcher when the target stops —
at once, with reason `noproc`, if it is already gone. `demonitor` cancels a monitor whose
Down has not been delivered. `link(a, b)` ties two children together: when either ends
abnormally the other is terminated with the same reason.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import Any

from phloem.base.logs import get_logger
from phloem.protocols.errors import PhloemError
from phloem.supervision.handle import ChildHandle
from phloem.supervision.reasons import Down, ExitReason

log = get_logger("phloem.supervision")

Watcher = Callable[[Down], None] | Any  # a callable, an ActorHandle or a pykka ActorRef


class MonitorRef:
    """The handle of one monitor; `id` is opaque and unique."""

    __slots__ = ("_callback", "_delivered", "_lock", "id", "target", "watcher")

    def __init__(self, target: ChildHandle, watcher: Watcher) -> None:
        self.id = f"mon-{secrets.token_hex(8)}"
        self.target = target
        self.watcher = watcher
        self._lock = threading.Lock()
        self._delivered = False
        self._callback: Callable[[ExitReason], None] | None = None

    @property
    def active(self) -> bool:
        """True until the Down is delivered or the monitor is removed."""
        return not self._delivered

    def _deliver(self, reason: ExitReason) -> None:
        with self._lock:
            if self._delivered:
                return
            self._delivered = True
        down = Down(ref=self.id, target=self.target.handle_id, reason=reason)
        _send_to_watcher(self.watcher, down)

    def __repr__(self) -> str:
        return f"<MonitorRef {self.id} on {self.target.handle_id}>"


def _send_to_watcher(watcher: Watcher, down: Down) -> None:
    try:
        if hasattr(watcher, "tell"):
            watcher.tell(down)
        elif callable(watcher):
            watcher(down)
        else:
            raise TypeError("watcher must be callable or have tell()")
    except Exception:
        log.warning("down_not_delivered", target=down.target, reason=str(down.reason))


def monitor(target: ChildHandle, watcher: Watcher) -> MonitorRef:
    """Watch `target`; `watcher` receives exactly one `Down` when it stops.

    `watcher` is an actor (handle or pykka ref; the Down is sent with `tell`) or a callable
    (invoked in the thread that observed the exit: keep it short). A target that is already
    gone yields `Down(reason=noproc)` at once.
    """
    if not isinstance(target, ChildHandle):
        raise TypeError("target must be a child handle or a SupervisorRef")
    if not (callable(watcher) or hasattr(watcher, "tell")):
        raise TypeError("watcher must be callable or an actor")
    ref = MonitorRef(target, watcher)
    if not target.is_alive():
        ref._deliver(ExitReason.noproc())
        return ref
    ref._callback = ref._deliver
    target.add_exit_callback(ref._deliver)
    return ref


def demonitor(ref: MonitorRef) -> bool:
    """Remove a monitor; True if it was active (its Down will never be delivered)."""
    with ref._lock:
        was_active = not ref._delivered
        ref._delivered = True
    if ref._callback is not None:
        ref.target.remove_exit_callback(ref._callback)
    return was_active


class Link:
    """A bidirectional link between two children; `unlink()` removes it."""

    def __init__(self, a: ChildHandle, b: ChildHandle) -> None:
        self.a = a
        self.b = b
        self._on_a = self._propagate_to(b)
        self._on_b = self._propagate_to(a)

    def _propagate_to(self, other: ChildHandle) -> Callable[[ExitReason], None]:
        def propagate(reason: ExitReason) -> None:
            if reason.is_normal or not other.is_alive():
                return
            # Terminate in another thread: the exiting child's thread must not block.
            threading.Thread(
                target=other.exit_with, args=(reason,), name="phloem-link", daemon=True
            ).start()

        return propagate

    def unlink(self) -> None:
        self.a.remove_exit_callback(self._on_a)
        self.b.remove_exit_callback(self._on_b)


def link(a: ChildHandle, b: ChildHandle) -> Link:
    """Link two children: an abnormal exit of either terminates the other with its reason.

    Linking to a child that is already gone raises `PhloemError('noproc')`.
    """
    if a is b:
        raise ValueError("cannot link a child to itself")
    for handle in (a, b):
        if not handle.is_alive():
            raise PhloemError("noproc", f"{handle.name!r} is not running")
    lnk = Link(a, b)
    a.add_exit_callback(lnk._on_a)
    b.add_exit_callback(lnk._on_b)
    return lnk
