"""Identifiers on disk: percent-encoded, never empty, at most `MAX_ID_BYTES` encoded.

Bytes of `A-Za-z0-9._-` are kept; every other byte of the UTF-8 form becomes `%XX`. A
leading `.` is encoded too, so no name is hidden, `.` or `..`, and names never clash
with the store's own dot-files (temporary files, the lock).
"""

from __future__ import annotations

import secrets
import time
from typing import Final
from urllib.parse import unquote_to_bytes

from phloem.protocols.errors import ErrorKind, PhloemError

MAX_ID_BYTES: Final = 200
_SAFE: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def encode_id(value: str, what: str = "session id") -> str:
    """The on-disk form of `value`; `invalid_argument` if empty or too long encoded."""
    if not isinstance(value, str) or not value:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{what} must be a non-empty string")
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{what} is not Unicode text") from None
    out = []
    for i, byte in enumerate(data):
        if byte in _SAFE and not (i == 0 and byte == 0x2E):
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    encoded = "".join(out)
    if len(encoded) > MAX_ID_BYTES:
        raise PhloemError(
            ErrorKind.INVALID_ARGUMENT,
            f"{what} is {len(encoded)} bytes encoded; at most {MAX_ID_BYTES}",
        )
    return encoded


def decode_id(name: str) -> str:
    """The identifier an encoded name stands for (`ValueError` if it is not one)."""
    if not name or encode_id(unquote_to_bytes(name).decode("utf-8")) != name:
        raise ValueError(f"not an encoded identifier: {name!r}")
    return unquote_to_bytes(name).decode("utf-8")


def new_session_id() -> str:
    """A fresh id that sorts by creation time: `s-YYYYMMDD-HHMMSS-` + 8 hex digits."""
    return time.strftime("s-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(4)
