"""Targets run inside process children by the process tests.

Kept to the standard library (plus the channel) so a child imports it in milliseconds:
children unpickle these functions by reference and import this module fresh.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from phloem.supervision.channel import Channel, ChannelClosed, ChannelError
from phloem.supervision.childwire import CHANNEL_FD

SECRET_MESSAGE = "upstream said api_key=sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345 is invalid"


def echo(ch: Channel) -> None:
    """Reply with whatever arrives until the daemon closes the channel."""
    try:
        while True:
            ch.send(ch.recv())
    except ChannelClosed:
        return


def serve(ch: Channel) -> None:
    """A small command server for tests: each request names an `op`."""
    while True:
        try:
            req: dict[str, Any] = ch.recv()
        except ChannelClosed:
            return
        op = req["op"]
        if op == "pid":
            ch.send(os.getpid())
        elif op == "nofile":
            ch.send(list(resource.getrlimit(resource.RLIMIT_NOFILE)))
        elif op == "env":
            ch.send(os.environ.get(req["name"]))
        elif op == "send_big":
            try:
                ch.send(b"x" * req["size"])
            except ChannelError as exc:
                ch.send({"error": exc.kind, "message": exc.message})
        elif op == "raw":
            os.write(CHANNEL_FD, req["data"])
        elif op == "alloc":
            try:
                block = bytearray(req["size"])
                ch.send(len(block))
            except MemoryError:
                ch.send("MemoryError")
        elif op == "ignore_sigterm":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            ch.send("armed")
        elif op == "spawn_tree":
            script = "sleep 300 & setsid sleep 300 & echo $!; wait"
            proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE)
            assert proc.stdout is not None
            ch.send({"bash": proc.pid, "line": proc.stdout.readline().decode().strip()})
        elif op == "exit":
            os._exit(req["code"])
        elif op == "raise":
            raise RuntimeError(req["message"])
        else:
            ch.send({"error": "unknown op"})


def raise_secret() -> None:
    raise ValueError(SECRET_MESSAGE)


def run_forever() -> None:
    threading.Event().wait()


def allocate(size: int) -> None:
    block = bytearray(size)
    block[-1] = 1


def burn_cpu() -> None:
    x = 0
    while True:
        x += 1


def sleep_then_exit(seconds: float, code: int) -> None:
    time.sleep(seconds)
    raise SystemExit(code)


class SlowToLoad:
    """Unpickling this in the child takes `seconds`: the child is late to report ready."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self) -> tuple[Any, tuple[float]]:
        return (time.sleep, (self.seconds,))


def double(x: int) -> int:
    return 2 * x


def fail_with(message: str) -> None:
    raise ValueError(message)


def exit_on_sigterm(ch: Channel, code: int) -> None:
    """Wait; on SIGTERM exit with `code` (a child that handles its stop itself). Says
    "armed" once its handler is in place, so a stop cannot arrive before it."""

    def on_term(signum: int, frame: object) -> None:
        os._exit(code)

    signal.signal(signal.SIGTERM, on_term)
    ch.send("armed")
    threading.Event().wait()


HOLD_CHUNK = 4 * 1024 * 1024  # under a member's share at the cap in these tests (no stall)


def _hold(size: int) -> None:
    """Make `size` bytes resident (every page written) in blocks of `HOLD_CHUNK`, then
    wait for ever. A block the tree's address-space budget refuses (`MemoryError`) is
    asked for again a moment later: the tree's cap ends it, not the helper giving up."""
    blocks: list[bytearray] = []
    while len(blocks) * HOLD_CHUNK < size:
        try:
            block = bytearray(min(HOLD_CHUNK, size - len(blocks) * HOLD_CHUNK))
        except MemoryError:
            time.sleep(0.005)
            continue
        for i in range(0, len(block), 4096):
            block[i] = 1
        blocks.append(block)
    threading.Event().wait()


def _fork_gated(
    helpers: int, then: Callable[[bytes], None], setsid: bool = False
) -> tuple[list[int], int]:
    """Fork `helpers` children (with `setsid`, in sessions of their own) that wait at a
    gate, then run `then(byte)` — the byte the parent wrote, or b"" once it closed the
    gate — and exit. Returns their pids and the gate's write end."""
    gate, go = os.pipe()
    pids = []
    for _ in range(helpers):
        pid = os.fork()
        if pid == 0:
            try:
                os.close(go)
                if setsid:
                    os.setsid()
                then(os.read(gate, 1))
            finally:
                os._exit(0)
        pids.append(pid)
    os.close(gate)
    return pids, go


def fork_hogs(ch: Channel, helpers: int, size: int, setsid: bool = False) -> None:
    """Fork `helpers` children that each hold `size` resident bytes (with `setsid`, in
    sessions of their own) once their pids are sent — so the cap cannot end the tree
    before the test knows them —, then wait for ever holding nothing."""
    pids, go = _fork_gated(helpers, lambda _: _hold(size), setsid)
    ch.send(pids)
    os.close(go)
    threading.Event().wait()


def fork_sharers(ch: Channel, helpers: int, size: int) -> None:
    """Make `size` bytes resident, fork `helpers` children that share them copy-on-write,
    send their pids; then, on "copy" from the test, each child allocates a copy of its own
    (its RSS grows), on "write" each writes to every page of the shared block (its RSS
    stays, the pages stop being shared). Either way the tree then really holds
    `helpers + 1` times `size`. Waits for ever."""
    shared = bytearray(size)
    for i in range(0, size, 4096):
        shared[i] = 1

    def unshare(mode: bytes) -> None:
        if mode == b"c":
            _hold(size)
        for i in range(0, size, 4096):
            shared[i] = 2
        threading.Event().wait()

    pids, go = _fork_gated(helpers, unshare)
    ch.send(pids)
    os.write(go, (b"c" if ch.recv() == "copy" else b"w") * helpers)
    threading.Event().wait()


def orphan_hogs(ch: Channel, helpers: int, size: int) -> None:
    """Start `helpers` Python processes in sessions of their own through a shell that
    exits at once (they are re-parented to the fork server), each holding `size`
    resident bytes; send their pids, then wait for ever."""
    code = (  # in blocks, a refused one asked again (see `_hold`)
        "import threading, time\nblocks = []\n"
        f"while len(blocks) * {HOLD_CHUNK} < {size}:\n"
        f"    try: blocks.append(b'x' * {HOLD_CHUNK})\n"
        "    except MemoryError: time.sleep(0.005)\n"
        "threading.Event().wait()"
    )
    script = f'for i in $(seq {helpers}); do setsid "$0" -c "$1" >/dev/null 2>&1 & echo $!; done'
    out = subprocess.run(
        ["sh", "-c", script, sys.executable, code], capture_output=True, check=True
    )
    ch.send([int(p) for p in out.stdout.split()])
    threading.Event().wait()
