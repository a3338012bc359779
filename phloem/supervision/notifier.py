"""The thread that records process children's exits and runs their exit callbacks.

The fork server's reader thread learns that a child exited; running the child's exit
callbacks (monitors, supervisors: user code) there would stall every other child's
report, so the reader hands the handle to `ExitNotifier` instead. Its queue holds at
most one entry per exited child.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Protocol

from phloem.base.logs import get_logger

log = get_logger("phloem.supervision.process")


class Finalizable(Protocol):
    handle_id: str

    def _finalize(self) -> None: ...


class ExitNotifier:
    """Finalizes exited children on one thread (their exit callbacks run there), so the
    fork-server reader never runs user code. Started on first use, again after a fork."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Finalizable] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()

    def put(self, handle: Finalizable) -> None:
        with self._lock:
            if self._thread is None or self._owner != os.getpid():
                self._owner = os.getpid()
                thread = threading.Thread(
                    target=self._run, name="phloem-process-exits", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError:  # interpreter shutting down: no new threads
                    handle._finalize()
                    return
                self._thread = thread
        self._queue.put(handle)

    def _run(self) -> None:
        while True:
            handle = self._queue.get()
            try:
                handle._finalize()
            except Exception:
                log.exception("process_exit_notification_failed", handle=handle.handle_id)
