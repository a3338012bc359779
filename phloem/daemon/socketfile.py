"""The socket file's rules: a 0700 (or 0711) directory, a stale socket replaced, a live one
refused, and the peer's credentials read with SO_PEERCRED."""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

import structlog

from phloem.protocols.errors import ErrorKind, PhloemError

log = structlog.get_logger("phloem.daemon")
_PEERCRED = struct.Struct("3i")


def prepare_socket_path(path: Path, shared: bool) -> None:
    """Create the socket's directory (0700, or 0711 when other uids are allowed) and
    clear a stale socket; refuse a live one or a non-socket file."""
    parent = path.parent
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = parent.stat()
    if st.st_uid == os.getuid():
        os.chmod(parent, 0o711 if shared else 0o700)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise PhloemError(ErrorKind.SOCKET_IN_USE, f"{path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2.0)
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)
        log.warning("stale_socket_removed", socket=str(path))
        return
    except OSError as exc:
        raise PhloemError(ErrorKind.SOCKET_IN_USE, f"cannot probe {path}: {exc}") from exc
    finally:
        probe.close()
    raise PhloemError(
        ErrorKind.DAEMON_RUNNING, f"a phloem daemon is already running at {path}; stop it first"
    )


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, gid = _PEERCRED.unpack(raw)
    return pid, uid, gid
