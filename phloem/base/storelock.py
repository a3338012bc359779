"""One store, one process: a store directory's `.lock` (flock) and who holds it.

A *store* is a directory one process at a time may write: the session store, the durable
runs' journals. `Store` names it and the error kind of a refusal. The process holding
the lock writes itself into the file — `{"pid": N}`, and for a daemon `"socket"` too —
so the one refused can say whom to look for (`session_store_locked`: "... held by the
phloem daemon pid 123 on socket ...").

- `claim(root)`: what a `DurableSessionService` takes while it is open; one claim per
  store at a time, in this process as in any other.
- `reserve(root, socket)`: what `phloem daemon` takes before its tree starts, so a second
  daemon on the same store (another socket, the same state directory) refuses to start
  instead of failing its session turns later — or, for the journals (`RUN_JOURNALS`),
  resuming the same durable runs as the first. The daemon's own sessions service then
  claims the reserved lock (`claim` finds it) rather than conflicting with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from phloem.base.durablefiles import io_error, private_dir
from phloem.protocols.errors import ErrorKind, PhloemError

LOCK_NAME = ".lock"
MAX_HOLDER_RECORD_BYTES = 4096  # the holder record read back from a lock file, at most


@dataclass(frozen=True)
class Store:
    """What a store is called in a refusal, and the refusal's error kind."""

    what: str
    kind: ErrorKind


SESSION_STORE = Store("the session store", ErrorKind.SESSION_STORE_LOCKED)
RUN_JOURNALS = Store("the durable run journal directory", ErrorKind.RUN_JOURNALS_LOCKED)


@dataclass
class _Reservation:
    fd: int
    claimed: bool = False


_guard = threading.Lock()
_reserved: dict[str, _Reservation] = {}  # store realpath -> this process's reservation


class StoreLock:
    """A held claim or reservation; `release()` lets it go (idempotent). A claim of this
    process's reservation borrows the reservation's descriptor and never closes it."""

    def __init__(self, key: str, fd: int, *, reservation: bool, borrowed: bool) -> None:
        self._key = key
        self._fd = fd
        self._reservation = reservation
        self._borrowed = borrowed

    def release(self) -> None:
        with _guard:
            fd, self._fd = self._fd, -1
            if fd < 0:
                return
            reserved = _reserved.get(self._key)
            if self._borrowed:
                if reserved is not None and reserved.fd == fd:
                    reserved.claimed = False
                return
            if self._reservation and reserved is not None and reserved.fd == fd:
                del _reserved[self._key]
        with contextlib.suppress(OSError):
            os.close(fd)


def claim(root: Path, store: Store = SESSION_STORE) -> StoreLock:
    """The store's lock for one open store (its directory exists); `session_store_locked`
    naming the holder when another store or process has it."""
    key = os.path.realpath(root)
    with _guard:
        reserved = _reserved.get(key)
        if reserved is not None and not reserved.claimed:
            reserved.claimed = True
            return StoreLock(key, reserved.fd, reservation=False, borrowed=True)
        if reserved is not None:
            raise _locked(root, _holder(reserved.fd), store)
        return StoreLock(key, _lock(root, None, store), reservation=False, borrowed=False)


def reserve(root: Path, socket: str, sync: bool = True, store: Store = SESSION_STORE) -> StoreLock:
    """Hold the store for this daemon (creating its directory, 0700) before the tree
    starts; `session_store_locked` naming the holder when another process has it."""
    key = os.path.realpath(root)
    with _guard:
        if key in _reserved:
            raise _locked(root, _holder(_reserved[key].fd), store)
        try:
            private_dir(root, sync)
            fd = _lock(root, socket, store)
        except OSError as exc:
            raise io_error(f"cannot open {store.what} {root}", exc) from None
        _reserved[key] = _Reservation(fd)
    return StoreLock(key, fd, reservation=True, borrowed=False)


def _lock(root: Path, socket: str | None, store: Store) -> int:
    """flock `root/.lock` (never waiting) and write this process in as its holder."""
    fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise _locked(root, holder, store) from None
    record: dict[str, object] = {"pid": os.getpid()}
    if socket is not None:
        record["socket"] = socket
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode() + b"\n", 0)
    except OSError:
        pass  # the lock is what counts; the record only helps the one refused
    return fd


def _holder(fd: int) -> str:
    """Who the record in an open lock file names ("another process" if it names no one)."""
    try:
        record = json.loads(os.pread(fd, MAX_HOLDER_RECORD_BYTES, 0) or b"null")
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return "another process"
    socket = record.get("socket")
    if isinstance(socket, str):
        return f"the phloem daemon pid {record['pid']} on socket {socket}"
    return f"pid {record['pid']}"


def _locked(root: Path, holder: str, store: Store) -> PhloemError:
    return PhloemError(store.kind, f"{store.what} {root} is held by {holder}")
