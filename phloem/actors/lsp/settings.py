"""The `[lsp]` configuration section (gathered by `phloem.config`).

    [lsp]
    mode = "auto"                        # auto | off

    [lsp.servers.ruff]
    command = ["ruff", "server"]         # found on PATH; never installed
    patterns = ["*.py", "*.pyi"]         # file names (globs) this server checks
    language_id = "python"
    initialize_timeout_s = 10
    request_timeout_s = 5
    settle_s = 1.5                       # wait for diagnostics of the written version
    max_memory_bytes = 2147483648        # resident memory of its process tree (2 GiB)
    idle_timeout_s = 600                 # unused this long: stopped (the next write restarts it)

With `mode = "auto"` the first successful write or edit of a matching file starts that
server for the workspace root; `off` starts none. A server's process tree is capped at
`max_memory_bytes` of resident memory (`supervision.stdio.stdio_spec`): over it the tree
is killed, warning `lsp_server_memory_exceeded`, and it counts as one of its failures. A
server no write has used for `idle_timeout_s` is shut down; the next write starts it
again, which is not a failure.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from phloem.base.settings import Section

ServerId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,31}$")]
Pattern = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]

INITIALIZE_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 5.0
SETTLE_S = 1.5
Timeout = Annotated[float, msgspec.Meta(ge=0.01, le=600.0)]
MIB = 1024 * 1024
DEFAULT_MAX_MEMORY_BYTES = 2048 * MIB
"""Default cap on the resident memory of a language server's process tree."""
MEMORY_BYTES_RANGE = (64 * MIB, 64 * 1024 * MIB)
"""Accepted `max_memory_bytes` of a language server (inclusive)."""
DEFAULT_FAILURE_THRESHOLD = 3
FAILURE_THRESHOLD_RANGE = (1, 100)
"""Accepted `failure_threshold` (inclusive)."""
DEFAULT_MAX_DIAGNOSTICS = 20
MAX_DIAGNOSTICS_RANGE = (1, 1_000)
"""Accepted `max_diagnostics_per_file` (inclusive)."""
DEFAULT_IDLE_TIMEOUT_S = 600.0
"""How long a language server may go unused before it is shut down."""
IDLE_TIMEOUT_RANGE = (0.1, 86_400.0)
"""Accepted `idle_timeout_s` (seconds, inclusive)."""


class LspServerConfig(Section, kw_only=True):
    """`[lsp.servers.ID]`: one language server."""

    # The server's argv; `command[0]` is found on PATH, never installed.
    command: Annotated[list[str], msgspec.Meta(min_length=1, max_length=256)]
    # Globs matched against a file's name or workspace-relative path: the files it checks.
    patterns: Annotated[list[Pattern], msgspec.Meta(min_length=1, max_length=64)]
    language_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]  # the LSP languageId
    # Time the server has to answer `initialize`; no answer counts as one of its failures
    # (three disable it).
    initialize_timeout_s: Timeout = INITIALIZE_TIMEOUT_S
    # Time the server has to answer `shutdown` when it is closed; then its process tree is
    # killed.
    request_timeout_s: Timeout = REQUEST_TIMEOUT_S
    # Wait after a write for the diagnostics of that version; none by then: no diagnostics.
    settle_s: Timeout = SETTLE_S
    # Cap on the resident memory of its process tree; over it the tree is killed (warning
    # `lsp_server_memory_exceeded`, one of its failures).
    max_memory_bytes: Annotated[
        int, msgspec.Meta(ge=MEMORY_BYTES_RANGE[0], le=MEMORY_BYTES_RANGE[1])
    ] = DEFAULT_MAX_MEMORY_BYTES
    # Unused (no write or edit checked) this long: shut down; the next one restarts it.
    idle_timeout_s: Annotated[
        float, msgspec.Meta(ge=IDLE_TIMEOUT_RANGE[0], le=IDLE_TIMEOUT_RANGE[1])
    ] = DEFAULT_IDLE_TIMEOUT_S

    # Configured but not used: no file starts it (plasmid's per-server `disabled`).
    disabled: bool = False

    def __post_init__(self) -> None:
        if any(not part for part in self.command):
            raise ValueError("command parts must not be empty")


class LspConfig(Section, kw_only=True):
    """`[lsp]`: the mode and the language servers by id."""

    # auto: a write or edit of a matching file starts its server; off: none is started.
    mode: Literal["auto", "off"] = "auto"
    servers: dict[ServerId, LspServerConfig] = {}  # the language servers, by id
    # Failures (not on PATH, crashed, no answer to initialize, over its memory cap) after
    # which a server is disabled for that workspace (warning `lsp_server_disabled`).
    failure_threshold: Annotated[
        int, msgspec.Meta(ge=FAILURE_THRESHOLD_RANGE[0], le=FAILURE_THRESHOLD_RANGE[1])
    ] = DEFAULT_FAILURE_THRESHOLD
    # Diagnostics of one file added to a write or edit result; the rest are left out.
    max_diagnostics_per_file: Annotated[
        int, msgspec.Meta(ge=MAX_DIAGNOSTICS_RANGE[0], le=MAX_DIAGNOSTICS_RANGE[1])
    ] = DEFAULT_MAX_DIAGNOSTICS
