"""The connection loop: one thread and one selector serve every connection past its hello.

A thread per connection cost more than the serving itself: with 64 connections on two
cores, most of the daemon's time went to handing the GIL between 64 reader threads (a
profile: 54% of samples in `recv`, 36% in `send`, under 5% routing, echo and framing).
Here one thread waits on every socket at once, reads what is ready, and runs what other
threads hand it (`call_soon`: a thread-safe queue and a wake-up byte on a socketpair).
Nothing that may block runs on this thread: `Connection` hands such requests to a thread
of their own and pauses that connection's reading meanwhile.

Not a general event loop: callbacks run in order, one at a time, and must not block.
Deadlines are scheduled on `supervision.timers`, whose callback hands them to the loop.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections import deque
from collections.abc import Callable

from phloem.base.logs import get_logger

log = get_logger("phloem.daemon")

WAKE_READ_BYTES = 4096  # wake-up bytes read at once (one per burst of `call_soon`)

Ready = Callable[[int], None]
"""A socket's handler: called on the loop with the selector's event mask."""


class ConnectionLoop:
    """One selector thread; `call_soon` from any thread, `watch` from the loop thread."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._calls: deque[Callable[[], None]] = deque()
        self._woken = False  # a wake-up byte is on its way: no need for another
        self.waiting = False  # in (or entering) select: `call_soon` must wake it
        self._stopping = False
        self._started = False
        self.thread = threading.Thread(target=self._run, name="phloem-connections", daemon=True)

    def start(self) -> None:
        self._started = True
        self.thread.start()

    def in_loop(self) -> bool:
        return threading.get_ident() == self.thread.ident

    def busy(self) -> bool:
        """Whether the loop thread is running callbacks (not waiting in select): what is
        handed to it now runs soon, with no wake-up (any thread)."""
        return self._started and not self.waiting

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the loop thread, after what is already queued (any thread)."""
        self._calls.append(fn)
        if self.waiting and not self._woken:  # else the loop reads the queue before it waits
            self._woken = True
            with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
                self._wake_w.send(b"\0")

    def watch(self, sock: socket.socket, events: int, handler: Ready) -> None:
        """Call `handler` when `sock` is ready for `events` (0: stop watching; loop thread)."""
        try:
            key = self._sel.get_key(sock)
        except (KeyError, ValueError):
            if events:
                self._sel.register(sock, events, handler)
            return
        if not events:
            self._sel.unregister(sock)
        elif key.events != events:
            self._sel.modify(sock, events, handler)

    def forget(self, sock: socket.socket) -> None:
        """Stop watching `sock`, if it was watched (loop thread)."""
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(sock)

    def stop(self, timeout: float) -> None:
        """End the loop (any thread) and wait up to `timeout` seconds for its thread."""

        def end() -> None:
            self._stopping = True

        if not self._started:
            self._close()
            return
        self.call_soon(end)
        if not self.in_loop():
            self.thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stopping:
                self.waiting = True  # before the queue is looked at: no call is missed
                ready = self._sel.select(0.0 if self._calls else None)
                self.waiting = False
                for key, events in ready:
                    if key.data is None:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(WAKE_READ_BYTES)
                        # After the read: a byte sent meanwhile may be consumed, but then
                        # its call is queued already and runs below. Cleared before the
                        # read, a byte sent between the two would be consumed with the
                        # flag left set, and no later `call_soon` would wake the loop.
                        self._woken = False
                    else:
                        self._guarded(key.data, events)
                self._run_calls()
        finally:
            self._close()

    def _close(self) -> None:
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def _run_calls(self) -> None:
        for _ in range(len(self._calls)):  # those queued meanwhile wait for the next round
            self._guarded(self._calls.popleft())

    def _guarded(self, fn: Callable[..., None], *args: int) -> None:
        try:
            fn(*args)
        except Exception:  # a handler's bug must not stop every other connection
            log.exception("connection_loop_callback_failed")
