"""systemd readiness (`Type=notify`): `READY=1`, `STATUS=...`, `RELOADING=1`, `STOPPING=1`.

The protocol is one datagram of newline-separated `KEY=VALUE` lines to the `AF_UNIX`
socket named by `$NOTIFY_SOCKET` (a path, or an abstract name written with a leading
`@`). Without the variable every call is a no-op, so the daemon behaves the same under
any other supervisor. The variable is taken out of the environment when read, so the
processes the daemon starts (tools, process children) cannot speak for it.

Notifying never fails the daemon: a send that fails is logged once and dropped.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time

from phloem.base.logs import get_logger

log = get_logger("phloem.daemon")

NOTIFY_ENV = "NOTIFY_SOCKET"
MAX_STATUS_CHARS = 200  # one STATUS= line; systemd shows it in `systemctl status`
SEND_TIMEOUT_S = 1.0


class Notifier:
    """Sends service-manager notifications, if a manager asked for them."""

    def __init__(self, address: str | None = None) -> None:
        if address is None:
            address = os.environ.pop(NOTIFY_ENV, None)
        self._address: str | bytes | None = None
        if address:
            self._address = "\0" + address[1:] if address.startswith("@") else address
        self._warned = False

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, **fields: str) -> bool:
        """Send one datagram of `KEY=VALUE` lines (keys upper-cased); False if none was
        sent (no manager, or the send failed)."""
        if self._address is None:
            return False
        lines = []
        for key, value in fields.items():
            text = " ".join(str(value).split())  # one line per field
            if key.lower() == "status":
                text = text[:MAX_STATUS_CHARS]
            lines.append(f"{key.upper()}={text}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            sock.settimeout(SEND_TIMEOUT_S)
            sock.sendto("\n".join(lines).encode(), self._address)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("notify_failed", socket=str(self._address), error=str(exc))
            return False
        finally:
            with contextlib.suppress(OSError):
                sock.close()
        return True

    def ready(self, status: str) -> bool:
        return self.send(ready="1", status=status, mainpid=str(os.getpid()))

    def reloading(self) -> bool:
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send(reloading="1", monotonic_usec=str(usec), status="reloading the config")

    def status(self, status: str) -> bool:
        return self.send(status=status)

    def stopping(self, status: str = "stopping") -> bool:
        return self.send(stopping="1", status=status)
