"""`LspHub`: language servers per (workspace root, server id), and the write/edit decoration.

`hub.decorate(tool)` wraps `write` and `edit` (other tools pass unchanged): after a
*successful* call on a file whose name matches a server's `patterns`, the hub sends the
file's new text to that server (starting it for the workspace root at the first such
write) and adds to the result

- `diagnostics`: `[{path, line, column, severity, code, source, message}]`, 1-based line
  and column, the workspace-relative path;
- `diagnostics_text`: one line each, `path:L:C: severity[ code][ (source)]: message`
  (the message's first line),

sorted, deduplicated, at most `MAX_DIAGNOSTICS` per file. A failed call is returned as
it is; so is a success when no diagnostics of the written version came within the
settle time. A server that fails `MAX_FAILURES` times (not on PATH, crashed, no answer
to initialize) is disabled (warning `lsp_server_disabled`); a crashed one is restarted at
the next need until then. `close()` stops every server's child (its process tree).
"""

from __future__ import annotations

import contextlib
import fnmatch
import threading
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from phloem.actors.lsp.settings import LspConfig, LspServerConfig
from phloem.base.logs import get_logger
from phloem.protocols.errors import PhloemError
from phloem.protocols.warnings import RunWarning, Warnings
from phloem.supervision.spec import ChildSpec, SupervisorSpec
from phloem.supervision.stdio import stdio_child
from phloem.supervision.supervisor import Supervisor, SupervisorRef
from phloem.tools.contract import JSON, Tool, ToolContext, is_failure

if TYPE_CHECKING:  # `lsprotocol` is imported with the first client (it takes ~0.7 s)
    from lsprotocol import types as lsp

    from phloem.actors.lsp.client import LspClient

log = get_logger("phloem.lsp")

MAX_FAILURES = 3
MAX_DIAGNOSTICS = 20
MAX_CLIENTS = 64
"""Most (root, server) pairs one hub runs at once."""
STOP_CHILD_S = 1.0
DECORATED = frozenset({"write", "edit"})
SEVERITY = {1: "error", 2: "warning", 3: "information", 4: "hint"}
"""LSP's `DiagnosticSeverity` values; a diagnostic without one counts as an error."""
MAX_TEXT_BYTES = 2 * 1024 * 1024
"""Largest file sent to a server (its JSON-escaped form must fit one 4 MiB message)."""


def render(relative: str, found: list[lsp.Diagnostic]) -> tuple[list[JSON], str]:
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
    kept = sorted(rows)[:MAX_DIAGNOSTICS]
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

    def _start_child(self, child_id: str, argv: list[str], cwd: str) -> Any:
        spec = ChildSpec(
            child_id, stdio_child(argv, None, cwd), restart="temporary", shutdown=STOP_CHILD_S
        )
        return self._sup().start_child(spec)

    def _stop_child(self, child_id: str) -> None:
        with contextlib.suppress(PhloemError):
            self._sup().terminate_child(child_id)

    # -- matching and checking ------------------------------------------------------------

    def server_for(self, relative: str) -> tuple[str, LspServerConfig] | None:
        """The first configured server whose patterns match `relative` (or its name)."""
        name = PurePosixPath(relative).name
        for server_id, cfg in self.config.servers.items():
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
                return record.client.check(relative, text)
            except LspFailure as exc:
                self._failed(record, str(exc))
                return None

    def _failed(self, record: _Server, why: str) -> None:
        record.failures += 1
        client = record.client
        log.warning("lsp_server_failed", server=client.server_id, error=why)
        client.close()
        if record.failures >= MAX_FAILURES:
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
                "state": "disabled" if r.disabled else ("running" if r.client.alive else "stopped"),
                "failures": r.failures,
                "pid": r.client.pid if r.client.alive else None,
            }
            for (root, server_id), r in records
        ]

    def decorate(self, tool: Tool) -> Tool:
        """`tool` with diagnostics on success when it is `write` or `edit`."""
        return DiagnosedTool(tool, self) if tool.name in DECORATED else tool

    def close(self) -> None:
        """Stop every server (their process trees); later writes start them again."""
        with self._lock:
            records = list(self._servers.values())
            self._servers = {}
        for record in records:
            record.client.close()
        own = self._own_supervisor
        if own is not None and own.is_alive():
            own.stop(5.0)


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
        items, rendered = render(relative, found)
        return {**result, "diagnostics": items, "diagnostics_text": rendered}

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        return self.inner.call(args, ctx)
