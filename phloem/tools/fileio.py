"""Bounded file reads and text detection shared by the file tools."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable

from phloem.tools.errors import ToolFailure

MAX_READ_BYTES = 5 * 1024 * 1024
MAX_WRITE_BYTES = 5 * 1024 * 1024
NUL_SCAN_BYTES = 8000
NON_PRINTABLE_LIMIT = 0.30
"""A text with more than this share of non-printable characters counts as binary."""

_NON_PRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")


def is_binary(data: bytes) -> bool:
    """NUL in the first 8000 bytes, invalid UTF-8, or > 30% non-printable characters."""
    if b"\x00" in data[:NUL_SCAN_BYTES]:
        return True
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    if not text:
        return False
    if _NON_PRINTABLE.search(text) is None:
        return False
    odd = sum(1 for _ in _NON_PRINTABLE.finditer(text))
    return odd * 10 > len(text) * 3


def read_regular(
    path: str | os.PathLike[str],
    limit: int,
    label: str,
    inside: Callable[[int], bool] | None = None,
) -> bytes:
    """Read a whole regular file of at most `limit` bytes, without following a final
    symlink; `directory`, `not_regular`, `missing` or `too_large` otherwise. `inside`
    checks the opened descriptor (`outside_root` when it says no)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ToolFailure("missing", f"no such file: {label}") from None
    except IsADirectoryError:
        raise ToolFailure("directory", f"{label} is a directory; use ls") from None
    except OSError as exc:
        if os.path.isdir(path):
            raise ToolFailure("directory", f"{label} is a directory; use ls") from None
        raise ToolFailure("io", f"cannot open {label}: {exc.strerror}") from None
    try:
        if inside is not None and not inside(descriptor):
            raise ToolFailure("outside_root", f"{label} leads outside the workspace root")
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise ToolFailure("directory", f"{label} is a directory; use ls")
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure("not_regular", f"{label} is not a regular file")
        if info.st_size > limit:
            raise ToolFailure(
                "too_large", f"{label} is {info.st_size} bytes; the limit is {limit} bytes"
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(descriptor, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise ToolFailure("too_large", f"{label} grew past the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)
