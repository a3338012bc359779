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

With `mode = "auto"` the first successful write or edit of a matching file starts that
server for the workspace root; `off` starts none.
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

    def __post_init__(self) -> None:
        if any(not part for part in self.command):
            raise ValueError("command parts must not be empty")


class LspConfig(Section, kw_only=True):
    """`[lsp]`: the mode and the language servers by id."""

    # auto: a write or edit of a matching file starts its server; off: none is started.
    mode: Literal["auto", "off"] = "auto"
    servers: dict[ServerId, LspServerConfig] = {}  # the language servers, by id
