"""`Workspace`: the root the coding tools are confined to, its read ledger and its
serialized, atomic mutations.

Every path a tool receives is workspace-relative (an absolute path is accepted only when
it lies inside the root). A path is resolved lexically and then through the file system;
`..`, absolute paths elsewhere, and symlinks (final or parent) that lead out of the root
are refused with `outside_root`. The read ledger remembers, per session, the size and
SHA-256 of each file as last read or written, so write and edit refuse files that were
never read (`never_read`) or changed since (`stale`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from phloem.tools.errors import ToolFailure

NEW_FILE_MODE = 0o644
NEW_DIR_MODE = 0o755
TEMP_PREFIX = ".phloem-write-"
MAX_PATH_BYTES = 4096
MAX_LEDGER_ENTRIES = 100_000
"""Ledger entries kept per workspace; the oldest are forgotten first (they then read as
never read, which is the safe direction)."""


@dataclass(frozen=True)
class Resolved:
    """A resolved workspace path: absolute real path and slash-separated relative form."""

    absolute: Path
    relative: str


@dataclass(frozen=True)
class Touch:
    """A workspace path a tool call read, wrote or searched (for instruction discovery)."""

    session: str
    kind: str
    path: str


def is_unicode(text: str) -> bool:
    """True unless `text` holds a lone surrogate (which no UTF-8 text can carry)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def shown(path: str) -> str:
    """`path` as text a result can carry. A name that is not UTF-8 is held with surrogate
    escapes (which no JSON can carry); it is shown with U+FFFD for each bad byte, as
    plasmid shows it. (Such a path names no file a tool can be asked for.)"""
    if is_unicode(path):
        return path
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Workspace:
    """A confined root plus its read ledger and mutation lock; safe to share by threads."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ValueError(f"root must be an existing directory: {os.fspath(root)}")
        self.root = Path(real)
        self._root_text = real
        self._ledger: dict[tuple[str, str], tuple[int, bytes]] = {}
        self._ledger_lock = threading.Lock()
        self.mutation_lock = threading.Lock()
        """Held for the whole of each write and edit: mutations run one at a time."""

    # -- paths -------------------------------------------------------------------------

    def resolve(self, path: str, *, must_exist: bool = True) -> Resolved:
        """Resolve workspace-relative `path`, refusing escapes; `missing` if it must exist."""
        if "\x00" in path:
            raise ToolFailure("arguments", "path must not contain NUL")
        if not is_unicode(path):
            raise ToolFailure("arguments", "path must be Unicode text (it holds a lone surrogate)")
        if len(path.encode()) > MAX_PATH_BYTES:
            raise ToolFailure("arguments", f"path must be at most {MAX_PATH_BYTES} bytes")
        if path == "":
            raise ToolFailure("arguments", "path must not be empty")
        lexical = os.path.normpath(os.path.join(self._root_text, path))
        if not _within(lexical, self._root_text):
            raise ToolFailure("outside_root", f"path is outside the workspace root: {path}")
        real = os.path.realpath(lexical)
        if not _within(real, self._root_text):
            raise ToolFailure("outside_root", f"path leads outside the workspace root: {path}")
        if must_exist and not os.path.lexists(real):
            raise ToolFailure("missing", f"no such file or directory: {path}")
        return Resolved(Path(real), self.relative(real))

    def relative(self, absolute: str | os.PathLike[str]) -> str:
        """Slash-separated path of `absolute` relative to the root ('.' for the root)."""
        rel = os.path.relpath(os.fspath(absolute), self._root_text)
        return "." if rel == "." else rel.replace(os.sep, "/")

    # -- read ledger ---------------------------------------------------------------------

    def record(self, session: str, relative: str, data: bytes) -> None:
        """Remember `data` as what `session` last saw of `relative`."""
        digest = hashlib.sha256(data).digest()
        with self._ledger_lock:
            key = (session, relative)
            self._ledger.pop(key, None)
            self._ledger[key] = (len(data), digest)
            while len(self._ledger) > MAX_LEDGER_ENTRIES:
                self._ledger.pop(next(iter(self._ledger)))

    def has_read(self, session: str, relative: str, data: bytes) -> bool:
        """True when the ledger holds exactly `data` for (`session`, `relative`)."""
        with self._ledger_lock:
            entry = self._ledger.get((session, relative))
        return entry == (len(data), hashlib.sha256(data).digest())

    def verify(self, session: str, relative: str, data: bytes) -> None:
        """Raise `never_read` or `stale` unless `data` is what the session last read."""
        with self._ledger_lock:
            entry = self._ledger.get((session, relative))
        if entry is None:
            raise ToolFailure(
                "never_read", f"{relative} was never read in this session; read it first"
            )
        size, digest = entry
        if size != len(data) or digest != hashlib.sha256(data).digest():
            raise ToolFailure("stale", f"{relative} changed since it was last read; read it again")

    def forget_session(self, session: str) -> None:
        with self._ledger_lock:
            for key in [k for k in self._ledger if k[0] == session]:
                del self._ledger[key]

    # -- atomic writes -------------------------------------------------------------------

    def make_parents(self, target: Path) -> None:
        """Create missing parent directories of `target` with mode 0755."""
        if not _within(os.path.realpath(target.parent), self._root_text):
            raise ToolFailure("outside_root", "parent directory leads outside the workspace root")
        missing: list[Path] = []
        parent = target.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        for directory in reversed(missing):
            try:
                directory.mkdir(mode=NEW_DIR_MODE)
            except FileExistsError:
                continue
            os.chmod(directory, NEW_DIR_MODE)
        if not _within(os.path.realpath(target.parent), self._root_text):
            raise ToolFailure("outside_root", "parent directory leads outside the workspace root")

    def holds_descriptor(self, descriptor: int) -> bool:
        """True when open `descriptor` refers to something inside the root. Checked after
        opening, so a directory swapped for a symlink after `resolve` cannot lead out."""
        try:
            real = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            return True  # no /proc: the path checks of resolve() are all there is
        return _within(real, self._root_text)

    def atomic_write(self, target: Path, data: bytes) -> None:
        """Write `data` to `target` through a synced temp file and a rename, both relative
        to the parent directory's descriptor (checked to be inside the root); keep the
        mode of an existing file, give a new one 0644, and sync the directory."""
        directory = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if not self.holds_descriptor(directory):
                raise ToolFailure("outside_root", "parent directory leads outside the workspace")
            try:
                info = os.stat(target.name, dir_fd=directory, follow_symlinks=False)
                mode = stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else NEW_FILE_MODE
            except FileNotFoundError:
                mode = NEW_FILE_MODE
            temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            descriptor = os.open(temp, flags, 0o600, dir_fd=directory)
            try:
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fchmod(handle.fileno(), mode)
                    os.fsync(handle.fileno())
                os.rename(temp, target.name, src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=directory)
                raise
            os.fsync(directory)
        finally:
            os.close(directory)
