"""Stdio children: an external program whose stdin and stdout the daemon talks to.

A `Command` child inherits the daemon's stdout and has /dev/null for stdin, so a program
that speaks a protocol over its stdio (an MCP server, a language server) runs behind a
small bridge instead: `stdio_child(argv, env, cwd)` is a `ProcessTarget` (with the
process channel) that starts the program with pipes, in the bridge's own process group,
and copies bytes both ways — each chunk the program writes is one channel frame of
`bytes` (at most `MAX_CHUNK_BYTES`), each `bytes` frame from the daemon is written to the
program's stdin, and a `None` frame closes its stdin. The bridge exits with the program's
exit status (a signal N is status 128+N), so the supervisor sees a crash as a crash; a
stop of the child kills its process group, and so the program, like any process child.
The bridge reports the program's pid (`_child.report_spawned`), so `phloem tree` lists
the program under the bridge with its own pid and memory.

The framing of what flows (newline-delimited JSON, Content-Length headers) is the
caller's business; the bridge moves bytes only.

`stdio_spec(id, argv, env, cwd, max_memory_bytes=...)` is the child spec both kinds of
stdio server (MCP, LSP) run under: a temporary child whose whole tree — the bridge and
the program with everything it starts — is capped at `max_memory_bytes` of resident
memory by the RSS watchdog (`Limits.max_rss_bytes`; over it the tree is frozen and
killed, exit reason `heap_exceeded`). No `RLIMIT_AS` is set: such servers are often
JVM, Go or Node programs that reserve far more address space than they use.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from phloem.supervision._child import report_spawned
from phloem.supervision.channel import ChannelClosed, ChannelTimeout
from phloem.supervision.spec import ChildSpec, Limits, ProcessTarget

MAX_CHUNK_BYTES = 256 * 1024
"""Largest chunk of the program's output carried in one channel frame."""
POLL_S = 0.2
"""How often the bridge checks, between frames from the daemon, that the program lives."""
STOP_GRACE_S = 1.0
"""SIGTERM grace of a stdio server's child before its process group is killed."""


def stdio_spec(
    child_id: str,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    *,
    max_memory_bytes: int,
    shutdown: float = STOP_GRACE_S,
) -> ChildSpec:
    """The temporary child spec of a stdio server capped at `max_memory_bytes` (see the
    module docstring)."""
    return ChildSpec(
        child_id,
        stdio_child(argv, env, cwd),
        restart="temporary",
        shutdown=shutdown,
        limits=Limits(max_rss_bytes=max_memory_bytes),
    )


def stdio_child(
    argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
) -> ProcessTarget:
    """The process target that runs `argv` behind the bridge (see the module docstring)."""
    if not argv or not all(isinstance(a, str) and a for a in argv):
        raise ValueError("argv must be a non-empty sequence of non-empty strings")
    return ProcessTarget(run_bridge, (list(argv), dict(env or {}), cwd), pass_channel=True)


def run_bridge(channel: Any, argv: list[str], env: dict[str, str], cwd: str | None) -> None:
    """The child half: start `argv` with pipes and copy bytes until it exits."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **env},
        cwd=cwd,
        close_fds=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    report_spawned(proc.pid, os.path.basename(argv[0]))  # the tree shows its pid and memory
    out_fd = proc.stdout.fileno()

    def pump_out() -> None:
        while True:
            try:
                chunk = os.read(out_fd, MAX_CHUNK_BYTES)
            except OSError:
                return
            if not chunk:
                return
            try:
                channel.send(chunk)
            except (ChannelClosed, ChannelTimeout):
                return

    reader = threading.Thread(target=pump_out, name="stdio-out", daemon=True)
    reader.start()
    stdin = proc.stdin
    while proc.poll() is None:
        try:
            data = channel.recv(POLL_S)
        except ChannelTimeout:
            continue
        except ChannelClosed:
            break  # the daemon went away: end the program
        if data is None:
            with contextlib.suppress(OSError):
                stdin.close()
            continue
        if not isinstance(data, bytes) or stdin.closed:
            continue
        try:
            stdin.write(data)
            stdin.flush()
        except OSError:
            break  # the program closed its stdin (it is exiting)
    if proc.poll() is None:
        proc.kill()
    code = proc.wait()
    reader.join(1.0)
    raise SystemExit(code if code >= 0 else 128 - code)
