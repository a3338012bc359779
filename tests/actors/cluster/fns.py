"""Functions the cluster tests run in process children (local or on Ray workers).

They are importable by name (`tests.actors.cluster.fns`), as anything shipped to a
cluster worker must be; the tests' `[cluster] modules` allow `tests`.
"""

from __future__ import annotations

import os
import time
from typing import Any


def double(x: int) -> int:
    return 2 * x


def whoami(_: Any) -> dict[str, Any]:
    return {"pid": os.getpid()}


def sleep_reporting(arg: dict[str, Any]) -> str:
    """Write our pid into the FIFO `arg["fifo"]`, then sleep `arg["s"]` seconds."""
    if arg.get("fifo"):
        with open(arg["fifo"], "w") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(arg.get("s", 60))
    return "slept"


def hog(mib: int) -> int:
    """Allocate `mib` MiB in 8 MiB pieces (far over a small cap)."""
    held = [bytearray(8 * 1024 * 1024) for _ in range(mib // 8)]
    return len(held)


def boom(_: Any) -> None:
    raise RuntimeError("exploded with api_key=sk-abcdefghijklmnopqrstuvwx")


def serve_forever(marker: str) -> None:
    """A plain target that runs until killed (a permanent supervised child)."""
    with open(marker, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(3600)


def add(a: int, b: int) -> dict[str, int]:
    """A function agent's callable: keyword arguments in, a mapping out (with the pid of
    the fork server that started us: it outlives the call)."""
    return {"sum": a + b, "pid": os.getpid(), "ppid": os.getppid()}


def agent_sleep(seconds: float, fifo: str = "") -> dict[str, Any]:
    if fifo:
        with open(fifo, "w") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return {"slept": seconds}


def agent_hog(mib: int) -> dict[str, int]:
    return {"n": hog(mib)}


def agent_crash(why: str) -> dict[str, Any]:
    raise ValueError(why)


def shout(word: str, pid_file: str) -> str:
    """An eval case's function agent: records the pid of the fork server that started
    it, answers `word` upper-cased."""
    with open(pid_file, "a") as f:
        f.write(f"{os.getppid()}\n")
    return word.upper()
