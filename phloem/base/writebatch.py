"""Write batches: a thread's writes to client connections, held and then written together.

A thread that produces several events at once — the Live loop handling every WebSocket
frame one socket read brought, say a model's text and its `turn_complete` — would
otherwise write each to the client's socket on its own: a syscall and a wake-up of the
client per event. Inside a batch (`hold` … `release`, on one thread), a connection that
this thread writes to is *corked*: its frames wait in its outbox, in order with frames
other threads send it meanwhile, and `release` uncorks every connection the batch
touched, so each gets one write. A batch lasts only as long as its holder's burst of work
(the Live loop releases it on the loop's next turn), so nothing waits on a timer.
"""

from __future__ import annotations

import threading
from typing import Protocol


class Corked(Protocol):
    """A connection a batch corked: `uncork` writes what it held (if nothing else still
    holds it)."""

    def uncork(self) -> None: ...


_local = threading.local()


def held() -> dict[Corked, None] | None:
    """This thread's open batch (the connections it corked, in order), or None."""
    batch: dict[Corked, None] | None = getattr(_local, "batch", None)
    return batch


def hold() -> bool:
    """Open a batch on this thread; False when one is already open (it goes on)."""
    if getattr(_local, "batch", None) is not None:
        return False
    _local.batch = {}
    return True


def release() -> None:
    """Close this thread's batch: every connection it corked writes what it held."""
    batch: dict[Corked, None] | None = getattr(_local, "batch", None)
    _local.batch = None
    if batch:
        for conn in batch:
            conn.uncork()
