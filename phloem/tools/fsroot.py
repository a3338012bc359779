"""`Tree`: files below a root opened without ever following a symlink out of it.

Used by the walk (`phloem.tools.walk`) and by grep's searcher, which needs nothing else
of the walk: kept in a module of its own so that a grep shard child imports only this.
"""

from __future__ import annotations

import os

from phloem.tools.errors import ToolFailure

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Tree:
    """The workspace root as a directory descriptor, and paths below it opened one
    component at a time, each relative to its parent's descriptor with `O_NOFOLLOW`: no
    symlink, and no directory swapped for one mid-call, leads out of the root.

    The descriptors of the last directory reached and its ancestors stay open, so files of
    one directory cost one `open` each. Not thread-safe; close it (or use `with`).
    """

    def __init__(self, root: str) -> None:
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._names: list[str] = []
        self._fds: list[int] = []
        self._last: tuple[str, int] | None = None  # the last directory asked for

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._trim(0)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _trim(self, keep: int) -> None:
        self._last = None
        while len(self._fds) > keep:
            self._names.pop()
            os.close(self._fds.pop())

    def directory(self, relative: str) -> int:
        """The descriptor of directory `relative` ("" or "." is the root), owned by the
        tree and valid until its next call; `OSError` when a component is missing, not a
        directory, or a symlink."""
        last = self._last
        if last is not None and last[0] == relative:
            return last[1]
        parts = components(relative)
        keep = 0
        for have, want in zip(self._names, parts, strict=False):
            if have != want:
                break
            keep += 1
        self._trim(keep)
        for name in parts[keep:]:
            parent = self._fds[-1] if self._fds else self.fd
            descriptor = os.open(name, DIR_FLAGS, dir_fd=parent)
            self._names.append(name)
            self._fds.append(descriptor)
        found = self._fds[-1] if self._fds else self.fd
        self._last = (relative, found)
        return found

    def open_file(self, relative: str) -> int:
        """A read-only descriptor of `relative`, not following a final symlink; the
        caller closes it. `OSError` as for `directory`, or from the open itself."""
        parent, _, name = relative.rpartition("/")
        return os.open(component(name), FILE_FLAGS, dir_fd=self.directory(parent))

    def lstat(self, relative: str) -> os.stat_result:
        """`lstat` of `relative`, taken through its parent's descriptor."""
        parent, _, name = relative.rpartition("/")
        if not name or name == ".":
            return os.stat(self.directory(parent))
        return os.stat(component(name), dir_fd=self.directory(parent), follow_symlinks=False)


def component(name: str) -> str:
    """`name` as one path component below the root; `arguments` error if it climbs."""
    if name in ("", ".", "..") or "/" in name:
        raise ToolFailure("arguments", "a walked path must not climb out or be empty")
    return name


def components(relative: str) -> list[str]:
    return [component(part) for part in relative.split("/") if part not in ("", ".")]
