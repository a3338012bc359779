"""The `[tools]` configuration section (gathered by `phloem.config`).

    [tools]
    bash_max_memory_bytes = 2147483648   # 2 GiB (64 MiB - 1 TiB)
    call_output_bytes = 30000            # one call's rendered output
    session_output_bytes = 400000        # one session's output, all calls together
    bash_timeout_ms = 120000             # a bash call's timeout when it names none
    bash_max_timeout_ms = 600000         # the most a bash call may ask for

`bash_max_memory_bytes` caps the resident memory of everything one `bash` call runs (its
process tree, summed by the supervision RSS watchdog as the child's
`Limits.max_rss_bytes`); over it the command is killed and the call ends `killed` with
`memory_exceeded`. The output and timeout keys are plasmid's `tools` block
(callOutputBytes, sessionOutputBytes, bashTimeoutMs, bashMaxTimeoutMs). Code that has the
configuration builds the coding tools, their output policy and the session budget with
it: `coding_tools(config.tools)`, `config.tools.output_policy()`, `config.tools.budget()`.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from phloem.base.settings import Section
from phloem.tools.outputlimit import (
    DEFAULT_MAX_BYTES,
    DEFAULT_SESSION_BUDGET,
    MAX_LIMIT,
    OutputBudget,
    OutputPolicy,
)

BASH_MAX_MEMORY_DEFAULT = 2 * 1024**3
BASH_MAX_MEMORY_RANGE = (64 * 1024**2, 1024**4)
"""Accepted `bash_max_memory_bytes` (inclusive), in the config and in `BashTool`."""
BASH_DEFAULT_TIMEOUT_MS = 120_000
BASH_MAX_TIMEOUT_MS = 600_000
BASH_TIMEOUT_RANGE_MS = (1, 86_400_000)
"""Accepted bash timeouts (inclusive, ms): `bash_timeout_ms`, `bash_max_timeout_ms`."""

OutputBytes = Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)]
TimeoutMs = Annotated[int, msgspec.Meta(ge=BASH_TIMEOUT_RANGE_MS[0], le=BASH_TIMEOUT_RANGE_MS[1])]


class ToolsConfig(Section, kw_only=True):
    """`[tools]`: limits of the coding tools."""

    # Resident memory of everything one `bash` call runs, summed; over it the command is
    # killed and the call ends `killed` with `memory_exceeded`.
    bash_max_memory_bytes: Annotated[
        int, msgspec.Meta(ge=BASH_MAX_MEMORY_RANGE[0], le=BASH_MAX_MEMORY_RANGE[1])
    ] = BASH_MAX_MEMORY_DEFAULT
    # Rendered output of one tool call, in bytes; more is elided with a truncation marker.
    call_output_bytes: OutputBytes = DEFAULT_MAX_BYTES
    # Rendered output of all of one session's tool calls together (a session's turns, an
    # agent's runs); past it calls get a `budget` marker. Compaction restores it.
    session_output_bytes: OutputBytes = DEFAULT_SESSION_BUDGET
    # The timeout of a bash call that names no `timeout_ms`.
    bash_timeout_ms: TimeoutMs = BASH_DEFAULT_TIMEOUT_MS
    # The longest timeout a bash call may ask for; a longer `timeout_ms` is capped to it.
    bash_max_timeout_ms: TimeoutMs = BASH_MAX_TIMEOUT_MS

    def __post_init__(self) -> None:
        if self.bash_timeout_ms > self.bash_max_timeout_ms:
            raise ValueError(
                f"bash_timeout_ms ({self.bash_timeout_ms}) is over bash_max_timeout_ms "
                f"({self.bash_max_timeout_ms})"
            )

    def output_policy(self) -> OutputPolicy:
        """The output policy of one tool call: `call_output_bytes`, the other defaults."""
        return OutputPolicy(max_bytes=self.call_output_bytes)

    def budget(self) -> OutputBudget:
        """A fresh per-session output budget of `session_output_bytes`."""
        return OutputBudget(self.session_output_bytes)
