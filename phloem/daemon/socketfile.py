"""The socket file's rules: a 0700 (or 0711) directory of the daemon's own, a stale socket
replaced, a live one refused, and the peer's credentials read with SO_PEERCRED.

The socket's directory is trusted the way ssh's StrictModes trusts a home directory: a
directory that already exists must be owned by the daemon's uid and not be writable by
group or others (followed through a symlink), or the daemon refuses to start
(`unsafe_socket_dir`) — whoever can write to it could move the live socket away and put
their own in its place. Only the socket's own directory is checked, not its ancestors.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError

log = get_logger("phloem.daemon")
_PEERCRED = struct.Struct("3i")


def prepare_socket_path(path: Path, shared: bool) -> None:
    """Create the socket's directory (0700, or 0711 when other uids are allowed), or check
    an existing one (`check_socket_dir`) and set that mode on it; clear a stale socket;
    refuse a live one or a non-socket file."""
    parent = path.parent
    try:
        parent.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    except OSError as exc:
        raise PhloemError(
            ErrorKind.SOCKET_ERROR, f"cannot create socket directory {parent}: {exc.strerror}"
        ) from exc
    check_socket_dir(parent)
    try:
        os.chmod(parent, 0o711 if shared else 0o700)
    except OSError as exc:
        raise PhloemError(
            ErrorKind.SOCKET_ERROR, f"cannot set the mode of {parent}: {exc.strerror}"
        ) from exc
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


def check_socket_dir(parent: Path) -> None:
    """Refuse a socket directory that is not owned by this process's effective uid or is
    writable by group or others (`unsafe_socket_dir`), or is not a directory at all
    (`socket_error`)."""
    try:
        st = os.stat(parent)  # through a symlink: what the socket would really live in
    except OSError as exc:
        raise PhloemError(
            ErrorKind.SOCKET_ERROR, f"cannot use socket directory {parent}: {exc.strerror}"
        ) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise PhloemError(ErrorKind.SOCKET_ERROR, f"socket directory {parent} is not a directory")
    uid = os.geteuid()
    if st.st_uid != uid:
        why = f"is owned by uid {st.st_uid}, not {uid}"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    else:
        return
    raise PhloemError(
        ErrorKind.UNSAFE_SOCKET_DIR, f"socket directory {parent} {why}; refusing to use it"
    )


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, gid = _PEERCRED.unpack(raw)
    return pid, uid, gid
