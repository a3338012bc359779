"""File primitives of every durable store (the session store, the run journals): private
directories and files, durable appends, atomic replacement, and reading a JSONL file
with torn-tail repair.

Directories are 0700 and files 0600 whatever the umask. With `sync` (the default) every
append is followed by `fdatasync`, and every create, rename or unlink by an `fsync` of
the parent directory, so an acknowledged write survives a crash of the machine.

Each store names its own failures with a `FileKinds` (the session store's are
`session_io`, `session_corrupt` and the warning `session_tail_repaired`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from phloem.protocols.depth import check_json_depth
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.warnings import RunWarning

DIR_MODE = 0o700
FILE_MODE = 0o600
MAX_LINE_BYTES = 64 * 1024 * 1024
"""A record line longer than this is refused on write (and is corrupt on read)."""


@dataclass(frozen=True)
class FileKinds:
    """How one store names its failures: an I/O error, a corrupt record, a repaired tail."""

    io: str
    corrupt: str
    repaired: str


SESSION_FILES = FileKinds(ErrorKind.SESSION_IO, ErrorKind.SESSION_CORRUPT, "session_tail_repaired")


def io_error(what: str, exc: OSError, kinds: FileKinds = SESSION_FILES) -> PhloemError:
    return PhloemError(kinds.io, f"{what}: {exc.strerror or exc}")


def private_dir(path: Path, sync: bool) -> Path:
    """Create `path` (and missing parents) as 0700 directories; fsync new entries."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(directory, DIR_MODE)
        if sync:
            sync_dir(directory.parent)
    return path


def sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, sync: bool) -> None:
    """Replace `path` with `data`: a private temporary file, synced, then renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        sync_dir(path.parent)


def remove(path: Path, sync: bool) -> bool:
    """Unlink `path` if it exists (and sync its directory); True if it was there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    if sync:
        sync_dir(path.parent)
    return True


class AppendFile:
    """One file opened for durable appends (`O_APPEND`), one record per `append`."""

    def __init__(self, path: Path, sync: bool) -> None:
        self.path = path
        self.sync = sync
        existed = path.exists()
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        if not existed:
            os.fchmod(self.fd, FILE_MODE)
            if sync:
                sync_dir(path.parent)
        self.size = os.fstat(self.fd).st_size

    def append(self, line: bytes) -> None:
        """Write one whole line and (with `sync`) make it durable before returning. A
        write that fails midway is cut back, so the file never keeps half a line."""
        view = memoryview(line)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
            if self.sync:
                os.fdatasync(self.fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, self.size)
            raise
        self.size += len(line)

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


@dataclass
class Lines:
    """A JSONL file read back: its decoded records (with 1-based line numbers) and the
    warning of a repaired torn tail, if there was one."""

    records: list[tuple[int, Any]]
    repaired: RunWarning | None = None


def _generic(line: bytes) -> Any:
    value = msgspec.json.decode(line)
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def read_jsonl(
    path: Path,
    *,
    repair: bool,
    sync: bool,
    decode: Callable[[bytes], Any] = _generic,
    kinds: FileKinds = SESSION_FILES,
) -> Lines:
    """Decode every complete line of `path` (`decode`: a JSON object by default).

    A last line without its newline is a torn write: with `repair` the file is cut back
    to the last newline (a `kinds.repaired` warning says so). A complete line that
    does not decode — not JSON, longer than `MAX_LINE_BYTES`, nested more than
    `MAX_NESTING_DEPTH` deep, or anything else `decode` raises for it — is
    `kinds.corrupt`, naming the file and line, and nothing is changed."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise io_error(f"cannot read {path}", exc, kinds) from None
    cut = data.rfind(b"\n") + 1
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(data[:cut].split(b"\n")[:-1], 1):
        try:
            if len(line) > MAX_LINE_BYTES:
                raise ValueError("line too long")
            check_json_depth(line)
            value = decode(line)
        except (msgspec.DecodeError, ValueError) as exc:
            raise corrupt(path, number, f"corrupt record ({exc})", kinds) from None
        except Exception as exc:  # RecursionError, or a decoder's surprise: still corrupt
            raise corrupt(path, number, f"corrupt record ({type(exc).__name__})", kinds) from None
        records.append((number, value))
    repaired = None
    if cut < len(data):  # checked after every complete line: a corrupt file is untouched
        if repair:
            try:
                os.truncate(path, cut)
                if sync:
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
            except OSError as exc:
                raise io_error(f"cannot repair {path}", exc, kinds) from None
        repaired = RunWarning.of(
            kinds.repaired,
            f"dropped a torn last line of {len(data) - cut} bytes (an append cut short by a crash)",
            path=str(path),
            line=len(records) + 1,
        )
    return Lines(records, repaired)


def corrupt(path: Path, line: int, why: str, kinds: FileKinds = SESSION_FILES) -> PhloemError:
    return PhloemError(
        kinds.corrupt,
        f"{path}:{line}: {why}; the file was left as it is",
        {"path": str(path), "line": line},
    )
