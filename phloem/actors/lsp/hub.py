"""`LspHub`: language servers per (workspace root, server id), and the write/edit decoration.

`hub.decorate(tool)` wraps `write` and `edit` (other tools pass unchanged): after a
*successful* call on a file whose name matches a server's `patterns`, the hub sends the
file's new text to that server (starting it for the workspace root at the first such
write) and adds to the result

- `diagnostics`: `[{path, line, column, severity, code, source, message}]`, 1-based line
  and column — the column in code points of the file's text, whatever position encoding
  the server negotiated (`positions.py`) — the workspace-relative path;
- `diagnostics_text`: one line each, `path:L:C: severity[ code][ (source)]: message`
  (the message's first line),

sorted, deduplicated, at most `[lsp] max_diagnostics_per_file` (20) per file. A failed
call is returned as it is; so is a success when no diagnostics of the written version
came within the settle time. A server that fails `[lsp] failure_threshold` (3) times
(not on PATH, crashed, no answer to initialize, killed over its `max_memory_bytes` —
warning `lsp_server_memory_exceeded`) is disabled (warning `lsp_server_disabled`); a
crashed one is restarted at the next need until then. A server no write has used for its
`idle_timeout_s` is shut down (its record stays, state `idle`) and started again,
transparently and not as a failure, by the next write that needs it. `close()` stops
every server's child (its process tree).
"""

from __future__ import annotations

import contextlib
import fnmatch
import threading
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from phloem.actors.lsp.settings import (
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_MAX_DIAGNOSTICS,
    LspConfig,
    LspServerConfig,
)
from phloem.base.logs import get_logger
from phloem.protocols.errors import PhloemError
from phloem.protocols.warnings import RunWarning, Warnings
from phloem.supervision import timers
from phloem.supervision.reasons import ExitKind
from phloem.supervision.spec import SupervisorSpec
from phloem.supervision.stdio import stdio_spec
from phloem.supervision.supervisor import Supervisor, SupervisorRef
from phloem.tools.contract import JSON, Tool, ToolContext, is_failure

if TYPE_CHECKING:  # `lsprotocol` is imported with the first client (it takes ~0.7 s)
    from lsprotocol import types as lsp

    from phloem.actors.lsp.client import LspClient

log = get_logger("phloem.lsp")

MAX_FAILURES = DEFAULT_FAILURE_THRESHOLD  # the default of `[lsp] failure_threshold`
MAX_DIAGNOSTICS = DEFAULT_MAX_DIAGNOSTICS  # the default of `[lsp] max_diagnostics_per_file`
MAX_CLIENTS = 64
"""Most (root, server) pairs one hub runs at once."""
EXIT_WAIT_S = 5.0
"""How long a failure of an exited server waits for its exit reason (to say whether it
was killed over its memory cap)."""
DECORATED = frozenset({"write", "edit"})
SEVERITY = {1: "error", 2: "warning", 3: "information", 4: "hint"}
"""LSP's `DiagnosticSeverity` values; a diagnostic without one counts as an error."""
MAX_TEXT_BYTES = 2 * 1024 * 1024
"""Largest file sent to a server (its JSON-escaped form must fit one 4 MiB message)."""


def render(
    relative: str, found: list[lsp.Diagnostic], limit: int = MAX_DIAGNOSTICS
) -> tuple[list[JSON], str]:
    """The `diagnostics` list and `diagnostics_text` of one file (see the docstring)."""
    rows = set()
    for diagnostic in found:
        start = diagnostic.range.start
        code = "" if diagnostic.code is None else str(diagnostic.code)
        severity = SEVERITY.get(int(diagnostic.severity or 1), "error")
        rows.add(
            (
                start.line + 1,
                start.character + 1,
                severity,
                code,
                diagnostic.source or "",
                diagnostic.message,
            )
        )
    kept = sorted(rows)[:limit]
    items = [
        {
            "path": relative,
            "line": line,
            "column": column,
            "severity": severity,
            "code": code,
            "source": source,
            "message": message,
        }
        for line, column, severity, code, source, message in kept
    ]
    lines = []
    for line, column, severity, code, source, message in kept:
        tail = (f" {code}" if code else "") + (f" ({source})" if source else "")
        first = next((part for part in message.splitlines() if part.strip()), "")
        lines.append(f"{relative}:{line}:{column}: {severity}{tail}: {first}")
    return items, "\n".join(lines)


class _Server:
    """The hub's record of one (root, server id): its client and failure count."""

    def __init__(self, client: LspClient) -> None:
        self.client = client
        self.failures = 0
        self.disabled = False
        self.idle = False  # shut down for being unused (until the next write starts it)
        self.last_error = ""
        self.used_at = 0.0  # when its last check ended (monotonic)
        self.timer: timers.Timer | None = None  # its idle shutdown, while one is due
        self.lock = threading.Lock()


class LspHub:
    """See the module docstring. Thread-safe."""

    def __init__(self, config: LspConfig) -> None:
        self.config = config
        self.warnings = Warnings()
        self._find_supervisor: Any = lambda: None
        self._own_supervisor: SupervisorRef | None = None
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, str], _Server] = {}

    def attach(self, find: Any) -> None:
        """Start servers under the supervisor `find()` returns (the tree's `lsp/servers`)."""
        self._find_supervisor = find

    def _sup(self) -> SupervisorRef:
        sup = self._find_supervisor()
        if isinstance(sup, SupervisorRef) and sup.is_alive():
            return sup
        with self._lock:
            if self._own_supervisor is None or not self._own_supervisor.is_alive():
                self._own_supervisor = Supervisor.start(
                    SupervisorSpec(intensity=0), [], name="lsp.servers"
                )
            return self._own_supervisor

    def _start_child(self, child_id: str, argv: list[str], cwd: str, max_memory: int) -> Any:
        spec = stdio_spec(child_id, argv, None, cwd, max_memory_bytes=max_memory)
        return self._sup().start_child(spec)

    def _stop_child(self, child_id: str) -> None:
        with contextlib.suppress(PhloemError):
            self._sup().terminate_child(child_id)

    # -- matching and checking ------------------------------------------------------------

    def server_for(self, relative: str) -> tuple[str, LspServerConfig] | None:
        """The first configured server (not `disabled`) whose patterns match `relative`
        (or its name)."""
        name = PurePosixPath(relative).name
        for server_id, cfg in self.config.servers.items():
            if cfg.disabled:
                continue
            if any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p) for p in cfg.patterns):
                return server_id, cfg
        return None

    def _record(self, root: Path, server_id: str, cfg: LspServerConfig) -> _Server | None:
        key = (str(root), server_id)
        with self._lock:
            found = self._servers.get(key)
            if found is None:
                if len(self._servers) >= MAX_CLIENTS:
                    return None
                from phloem.actors.lsp.client import LspClient

                client = LspClient(server_id, cfg, root, self._start_child, self._stop_child)
                found = self._servers[key] = _Server(client)
            return found

    def diagnostics(self, root: Path, relative: str, text: str) -> list[lsp.Diagnostic] | None:
        """Diagnostics of `text` as the content of `relative` under `root`, or None (no
        server, disabled, failed, or nothing within the settle time)."""
        if self.config.mode == "off" or len(text.encode()) > MAX_TEXT_BYTES:
            return None
        match = self.server_for(relative)
        if match is None:
            return None
        server_id, cfg = match
        record = self._record(root, server_id, cfg)
        if record is None:
            return None
        with record.lock:
            try:
                return self._check(record, relative, text)
            finally:
                self._touch(record)

    def _check(self, record: _Server, relative: str, text: str) -> list[lsp.Diagnostic] | None:
        if record.disabled:
            return None
        if record.client.crashed:  # it died since the last write: restart, counted
            self._failed(record, "the server exited")
            if record.disabled:
                return None
        from phloem.actors.lsp.client import LspFailure

        try:
            if not record.client.alive:
                record.client.start()
                record.idle = False
            return record.client.check(relative, text)
        except LspFailure as exc:
            self._failed(record, str(exc))
            return None

    # -- idle shutdown --------------------------------------------------------------------

    def _touch(self, record: _Server) -> None:
        """A check ended: the server's idle shutdown is due `idle_timeout_s` from now."""
        record.used_at = time.monotonic()
        if record.timer is not None:
            record.timer.cancel()
            record.timer = None
        if record.client.alive and not record.disabled:
            record.timer = timers.call_later(
                record.client.cfg.idle_timeout_s, self._idle_due, record
            )

    def _idle_due(self, record: _Server) -> None:
        # on the timer thread, which must not block: the shutdown waits for the server
        threading.Thread(
            target=self._stop_if_idle, args=(record,), name="lsp-idle", daemon=True
        ).start()

    def _stop_if_idle(self, record: _Server) -> None:
        if not record.lock.acquire(blocking=False):
            return  # in use: the end of that check schedules the shutdown again
        try:
            client = record.client
            unused = time.monotonic() - record.used_at
            if record.disabled or not client.alive or unused < client.cfg.idle_timeout_s:
                return
            log.info("lsp_server_idle_stopped", server=client.server_id, root=str(client.root))
            client.close()
            record.idle = True
        finally:
            record.lock.release()

    def _failed(self, record: _Server, why: str) -> None:
        record.failures += 1
        client = record.client
        reason = None if client.alive else client.exit_reason(EXIT_WAIT_S)
        if reason is not None and reason.kind is ExitKind.HEAP_EXCEEDED:
            why = (
                f"killed over its memory cap (max_memory_bytes = {client.cfg.max_memory_bytes}): "
                f"{reason.detail or 'heap_exceeded'}"
            )
            self.warnings.add(
                RunWarning.of(
                    "lsp_server_memory_exceeded",
                    f"language server {client.server_id} for {client.root} was {why}",
                )
            )
        record.last_error = why
        log.warning("lsp_server_failed", server=client.server_id, error=why)
        client.close()
        if record.failures >= self.config.failure_threshold:
            record.disabled = True
            self.warnings.add(
                RunWarning.of(
                    "lsp_server_disabled",
                    f"language server {client.server_id} for {client.root} failed "
                    f"{record.failures} times and is disabled (last: {why})",
                )
            )

    def info(self) -> list[JSON]:
        with self._lock:
            records = list(self._servers.items())
        return [
            {
                "root": root,
                "server": server_id,
                "state": _state(r),
                "failures": r.failures,
                "pid": r.client.pid if r.client.alive else None,
                "error": r.last_error,
            }
            for (root, server_id), r in records
        ]

    def status(self, root: str) -> str | None:
        """`LSP: none detected` until a server has started for workspace `root`, then
        `LSP: ` and the sorted ids of the servers started there and not disabled (an idle
        one counts: the next write starts it again); None with `mode = "off"`."""
        if self.config.mode == "off":
            return None
        real = str(Path(root).resolve())
        with self._lock:
            ids = sorted(
                server_id
                for (where, server_id), record in self._servers.items()
                if where == real and not record.disabled and (record.client.alive or record.idle)
            )
        return f"LSP: {', '.join(ids)}" if ids else "LSP: none detected"

    def decorate(self, tool: Tool) -> Tool:
        """`tool` with diagnostics on success when it is `write` or `edit`."""
        return DiagnosedTool(tool, self) if tool.name in DECORATED else tool

    def close(self) -> None:
        """Stop every server (their process trees); later writes start them again."""
        with self._lock:
            records = list(self._servers.values())
            self._servers = {}
        for record in records:
            if record.timer is not None:
                record.timer.cancel()
            record.client.close()
        own = self._own_supervisor
        if own is not None and own.is_alive():
            own.stop(5.0)


def _state(record: _Server) -> str:
    """running | idle (shut down for being unused) | stopped | disabled."""
    if record.disabled:
        return "disabled"
    if record.client.alive:
        return "running"
    return "idle" if record.idle else "stopped"


class DiagnosedTool(Tool):
    """A `write` or `edit` whose successful results carry the file's diagnostics."""

    def __init__(self, inner: Tool, hub: LspHub) -> None:
        self.inner = inner
        self.hub = hub
        self.name = inner.name
        self.description = inner.description
        self.input_schema = inner.input_schema

    def run(self, args: Any, ctx: ToolContext) -> JSON:
        result = self.inner.run(args, ctx)
        if is_failure(result) or not isinstance(result.get("path"), str):
            return result
        relative = result["path"]
        root = ctx.workspace.root
        try:
            text = (Path(root) / relative).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return result
        found = self.hub.diagnostics(Path(root), relative, text)
        if found is None:
            return result
        items, rendered = render(relative, found, self.hub.config.max_diagnostics_per_file)
        return {**result, "diagnostics": items, "diagnostics_text": rendered}

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        return self.inner.call(args, ctx)
