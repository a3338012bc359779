"""The `bash` tool: run a shell command as a supervised process child.

The command runs as `bash -c COMMAND` (or `sh -c` without bash) from the supervision
core's fork server: its own process group, stdin at /dev/null, a few environment
additions for non-interactive use. On timeout or cancellation it is stopped with the
process child's own stop sequence (`ProcessHandle.stop`): SIGTERM to the group, SIGKILL
after a 2 s grace, every descendant reaped (none is left behind). The exit code and signal
come from the exit reason's `exit_code` and `signal` fields.
stdout and stderr go to private capture files; each is then limited by the output policy.

Memory: `max_memory_bytes` (`[tools] bash_max_memory_bytes`, 2 GiB) caps the resident
memory of the command's processes. It is the process child's `Limits.max_rss_bytes`: the
supervision core's RSS watchdog (`supervision.watchdog`) sums the resident memory of the
child's whole tree (its process group, its descendants, marked orphans) every 0.1 s and,
over the cap (by RSS, confirmed by PSS), freezes and kills the tree at once (no grace);
the child ends `heap_exceeded`, which the call reports as `killed` with `memory_exceeded`
and a `kill_reason` naming the cap. Each
process also gets `RLIMIT_AS` of `ADDRESS_SPACE_FACTOR` times the cap (the child's
`Limits.max_memory_bytes`): a backstop for an allocation too fast for the 0.1 s reading —
inside it an allocation fails in the command itself (e.g. `MemoryError`). What the
command wrote before the kill is in its capture files and is returned.

bash is not a security boundary: the command sees the whole machine as the daemon's user.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from phloem.base import telemetry
from phloem.protocols.limits import check_range
from phloem.supervision.handle import ChildStartError
from phloem.supervision.process import ProcessHandle, start_process
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import Command, Limits
from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.errors import ToolFailure
from phloem.tools.outputlimit import OutputWriter, Report
from phloem.tools.settings import (
    BASH_DEFAULT_TIMEOUT_MS,
    BASH_MAX_MEMORY_DEFAULT,
    BASH_MAX_MEMORY_RANGE,
    BASH_MAX_TIMEOUT_MS,
    BASH_TIMEOUT_RANGE_MS,
)

DEFAULT_TIMEOUT_MS = BASH_DEFAULT_TIMEOUT_MS
MAX_TIMEOUT_MS = BASH_MAX_TIMEOUT_MS
KILL_GRACE_S = 2.0
MAX_COMMAND_CHARS = 64 * 1024
CAPTURE_KEEP_BYTES = 256 * 1024
"""Bytes kept from each end of a stream for the output limiter (the rest is counted)."""
MAX_CAPTURE_BYTES = 256 * 1024 * 1024
"""A command that writes more than this to one stream is killed (`killed`, output_overflow)."""
WATCH_INTERVAL_S = 0.05
STOP_WAIT_S = 5.0
"""After SIGKILL, how long to wait for the child's exit report before giving up on it
(the `reap_timeout` of `ProcessHandle.stop`)."""
ADDRESS_SPACE_FACTOR = 4
"""Each process's RLIMIT_AS, as a multiple of the memory cap (a per-process backstop)."""
MiB = 1024 * 1024
ENV_ADDITIONS = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "DEBIAN_FRONTEND": "noninteractive",
    "NO_COLOR": "1",
}
_REDIRECT = 'exec "$0" -c "$1" >"$2" 2>"$3"'


def shell_path() -> str:
    """bash when available, otherwise sh."""
    return shutil.which("bash") or shutil.which("sh") or "/bin/sh"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def _limit(ctx: ToolContext, path: Path) -> tuple[str, Report]:
    """One capture file through the one bounded writer of the output policy (the first
    and last `CAPTURE_KEEP_BYTES` kept, the rest counted), charged to the budget."""
    writer = OutputWriter(ctx.policy, CAPTURE_KEEP_BYTES)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            writer.write(chunk)
    if not writer.size:
        return "", Report()
    grant = None
    if ctx.budget is not None:
        grant = ctx.budget.reserve(ctx.session, ctx.policy.max_bytes)
    output = ""
    try:
        output, report = writer.render(grant)
    finally:
        if ctx.budget is not None and grant is not None:
            ctx.budget.consume(ctx.session, grant, len(output.encode()))
    return output, report


class BashTool(Tool):
    name = "bash"
    description = (
        "Run a shell command with `bash -c` in the workspace (or a subdirectory `dir`). "
        "stdin is empty; the command runs in its own process group and is stopped "
        "(SIGTERM, then SIGKILL after 2 s) when `timeout_ms` passes. Returns stdout, "
        "stderr, exit_code (-1 when signalled) and the signal. Not a security boundary."
    )
    input_schema = object_schema(
        {
            "command": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_COMMAND_CHARS,
                "description": "The shell command.",
            },
            "dir": {
                "type": "string",
                "default": ".",
                "description": "Workspace-relative working directory.",
            },
            "timeout_ms": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_TIMEOUT_MS,
                "description": f"Timeout in milliseconds (capped at {MAX_TIMEOUT_MS}).",
            },
        },
        ["command"],
    )

    def __init__(
        self,
        limits: Limits | None = None,
        kill_grace_s: float = KILL_GRACE_S,
        max_memory_bytes: int = BASH_MAX_MEMORY_DEFAULT,
        *,
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        max_timeout_ms: int = MAX_TIMEOUT_MS,
    ) -> None:
        """`max_memory_bytes` caps the resident memory of a command's processes (see the
        module docstring; it becomes the child's `Limits.max_rss_bytes`); `limits` adds
        rlimits for each process (its `max_memory_bytes`, when set, replaces the
        address-space backstop of `ADDRESS_SPACE_FACTOR` x cap). `limits.max_rss_bytes`
        must not be set: the one tree cap is `max_memory_bytes`. `default_timeout_ms` is
        the timeout of a call naming none, `max_timeout_ms` caps what a call may ask for
        (`[tools] bash_timeout_ms`, `bash_max_timeout_ms`)."""
        check_range("kill_grace_s", kill_grace_s, 0, 60, integer=False)
        self.max_timeout_ms = check_range("max_timeout_ms", max_timeout_ms, *BASH_TIMEOUT_RANGE_MS)
        self.default_timeout_ms = check_range(
            "default_timeout_ms", default_timeout_ms, BASH_TIMEOUT_RANGE_MS[0], max_timeout_ms
        )
        if (default_timeout_ms, max_timeout_ms) != (DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS):
            schema = copy.deepcopy(type(self).input_schema)
            timeout = schema["properties"]["timeout_ms"]
            timeout["default"] = default_timeout_ms
            timeout["description"] = f"Timeout in milliseconds (capped at {max_timeout_ms})."
            self.input_schema = schema
        self.max_memory_bytes = check_range(
            "max_memory_bytes", max_memory_bytes, *BASH_MAX_MEMORY_RANGE
        )
        if limits is None:
            limits = Limits()
        if limits.max_rss_bytes is not None:
            raise ValueError("limits.max_rss_bytes: the bash tool's cap is max_memory_bytes")
        backstop = limits.max_memory_bytes or max_memory_bytes * ADDRESS_SPACE_FACTOR
        limits = dataclasses.replace(
            limits, max_memory_bytes=backstop, max_rss_bytes=max_memory_bytes
        )
        self.limits = limits
        self.kill_grace_s = kill_grace_s

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        resolved = ctx.workspace.resolve(args["dir"])
        if not resolved.absolute.is_dir():
            raise ToolFailure("arguments", f"dir must be a directory: {resolved.relative}")
        timeout_s = min(args["timeout_ms"], self.max_timeout_ms) / 1000.0
        with tempfile.TemporaryDirectory(prefix="phloem-bash-") as capture:
            out_path, err_path = Path(capture, "stdout"), Path(capture, "stderr")
            out_path.touch(0o600)
            err_path.touch(0o600)
            env = {**ENV_ADDITIONS, **telemetry.child_env(), "PWD": str(resolved.absolute)}
            shell = shell_path()
            argv = [
                "/bin/sh",
                "-c",
                _REDIRECT,
                shell,
                args["command"],
                str(out_path),
                str(err_path),
            ]
            command = Command(argv=argv, env=env, cwd=str(resolved.absolute))
            try:
                handle = start_process(command, name="bash", limits=self.limits)
            except ChildStartError as exc:
                raise ToolFailure("spawn_failed", f"cannot start {shell}: {exc}") from None
            try:
                outcome = self._wait(handle, timeout_s, ctx, (out_path, err_path))
            finally:
                if handle.wait(0) is None:  # only when _wait itself was interrupted
                    handle.kill()
            stdout, stdout_report = _limit(ctx, out_path)
            stderr, stderr_report = _limit(ctx, err_path)
        ctx.touch("bash", resolved.relative)
        return {
            **outcome,
            "stdout": stdout,
            "stderr": stderr,
            "truncated": stdout_report.truncated or stderr_report.truncated,
            "stdout_report": stdout_report.to_dict(),
            "stderr_report": stderr_report.to_dict(),
        }

    def _wait(
        self, handle: ProcessHandle, timeout_s: float, ctx: ToolContext, files: tuple[Path, Path]
    ) -> JSON:
        deadline = time.monotonic() + timeout_s
        timed_out = cancelled = overflow = False
        reason: ExitReason | None = None
        while reason is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            reason = handle.wait(min(remaining, WATCH_INTERVAL_S))
            if reason is not None:
                break
            if ctx.cancel.is_set():
                cancelled = True
                break
            if any(_size(path) > MAX_CAPTURE_BYTES for path in files):
                overflow = True
                break
        stopped = timed_out or cancelled or overflow
        if reason is None:
            reason = handle.stop(self.kill_grace_s, reap_timeout=STOP_WAIT_S)
        exit_code, sig = _exit_of(reason, stopped=stopped)
        if cancelled:
            raise ToolFailure("cancelled", "the bash command was cancelled and stopped")
        # Over the tree cap the watchdog killed it (also while a stop was under way).
        memory = reason.kind == ExitKind.HEAP_EXCEEDED
        why = ""
        if memory:
            cap = self.max_memory_bytes
            why = (
                f"memory: the command's processes went over the cap of {_mib(cap)} "
                f"([tools] bash_max_memory_bytes = {cap}): {reason.detail or 'heap_exceeded'}"
            )
        elif overflow:
            why = f"output: a stream passed {MAX_CAPTURE_BYTES} bytes"
        elif timed_out and sig == "SIGKILL":
            why = f"timeout: still running {self.kill_grace_s:g} s after SIGTERM"
        result: JSON = {
            "exit_code": exit_code,
            "signal": sig,
            "timed_out": timed_out,
            "killed": bool(why),
        }
        if overflow:
            result["output_overflow"] = True
        if memory:
            result["memory_exceeded"] = True
        if why:
            result["kill_reason"] = why
        return result


def _mib(size: int) -> str:
    return f"{size / MiB:.0f} MiB"


def _size(path: Path) -> int:
    with contextlib.suppress(OSError):
        return os.stat(path).st_size
    return 0


def _exit_of(reason: ExitReason, stopped: bool) -> tuple[int, str]:
    """(exit code or -1, signal name or "") from the process child's exit reason."""
    if reason.signal is not None:
        return -1, _signal_name(reason.signal)
    if reason.exit_code is not None:
        return reason.exit_code, ""
    # No exit was reported (the child was given up on after SIGKILL): say what we sent.
    if reason.kind == ExitKind.SHUTDOWN:
        return -1, "SIGTERM"
    if reason.kind == ExitKind.KILLED or stopped:
        return -1, "SIGKILL"
    return -1, ""
