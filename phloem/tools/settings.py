"""The `[tools]` configuration section (gathered by `phloem.config`).

    [tools]
    bash_max_memory_bytes = 2147483648   # 2 GiB (64 MiB - 1 TiB)

`bash_max_memory_bytes` caps the resident memory of everything one `bash` call runs (its
process tree, summed by the supervision RSS watchdog as the child's
`Limits.max_rss_bytes`); over it the command is killed and the call ends `killed` with
`memory_exceeded`. Code that has the configuration builds the coding tools with it:
`coding_tools(config.tools)`, `default_registry(config.tools)`.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from phloem.base.settings import Section

BASH_MAX_MEMORY_DEFAULT = 2 * 1024**3
BASH_MAX_MEMORY_RANGE = (64 * 1024**2, 1024**4)
"""Accepted `bash_max_memory_bytes` (inclusive), in the config and in `BashTool`."""


class ToolsConfig(Section):
    """`[tools]`: limits of the coding tools."""

    # Resident memory of everything one `bash` call runs, summed; over it the command is
    # killed and the call ends `killed` with `memory_exceeded`.
    bash_max_memory_bytes: Annotated[
        int, msgspec.Meta(ge=BASH_MAX_MEMORY_RANGE[0], le=BASH_MAX_MEMORY_RANGE[1])
    ] = BASH_MAX_MEMORY_DEFAULT
