"""Reading a named file whole, bounded: the one reader for config, plan, eval and
instruction files.

A path given by a user can name anything: a FIFO (opening it waits for a writer), a
device (`/dev/zero` never ends), a directory. `read_prefix` opens without blocking,
refuses whatever is not a regular file, and reads at most one byte past the limit, so
"too large" is known without reading the rest. `read_bounded` is the same with each
failure a `PhloemError` of the caller's kind.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from phloem.protocols.errors import ErrorKind, PhloemError

CHUNK_BYTES = 64 * 1024


class UnreadableFile(Exception):
    """The file cannot be read; the message says why, for a person."""


class Prefix(NamedTuple):
    """Up to `limit + 1` bytes of a file, and the size `stat` gave it."""

    data: bytes
    size: int


def read_prefix(path: str | os.PathLike[str], limit: int) -> Prefix:
    """At most `limit + 1` bytes of the regular file `path` (more than `limit` means the
    file is larger); raises `UnreadableFile` for anything else or an I/O error."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile("not a regular file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, CHUNK_BYTES))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return Prefix(b"".join(chunks), info.st_size)


def read_bounded(path: str | os.PathLike[str], limit: int, error: ErrorKind) -> bytes:
    """The bytes of the regular file `path`; a `PhloemError` of kind `error` naming the
    path if it cannot be read, is not a regular file or holds more than `limit` bytes."""
    p = Path(path)
    try:
        data = read_prefix(p, limit).data
    except UnreadableFile as exc:
        raise PhloemError(error, f"{p}: {exc}") from None
    if len(data) > limit:
        raise PhloemError(error, f"{p}: larger than {limit} bytes")
    return data
