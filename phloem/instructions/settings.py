"""The `[instructions]` configuration section (gathered by `phloem.config`).

    [instructions]
    max_file_bytes = 16384          # one instruction file (the rest is cut, with a warning)
    max_bytes = 262144              # all active instructions of a run together
    max_import_depth = 4            # `@path` imports nested at most this deep
    import_roots = []               # extra directories `@path` imports may read from
    touches_per_tool_call = 256     # paths one tool call can activate instructions for
    skill_roots = []                # directories of skill folders (`NAME/SKILL.md`)
    template_roots = []             # directories of prompt templates (`NAME.md`)
    prompt_commands = "trusted"     # off | trusted | on: `!`cmd`` in templates and skills
    command_timeout_ms = 5000       # one prompt command
    document_timeout_ms = 15000     # all prompt commands of one template or skill
    command_output_bytes = 16384    # output kept from one prompt command
    document_output_bytes = 65536   # output kept from all commands of one document

    [instructions.foreign]          # skills and templates Claude Code, Codex and Copilot keep
    enabled = false
    claude = true
    codex = true
    copilot = true
    trusted_roots = []              # workspaces whose own skills and templates are trusted

Every number is a named limit below with its range (`phloem config check` shows them).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from phloem.base.settings import Section, section

KiB = 1024
MiB = 1024 * KiB

MAX_FILE_BYTES = 16 * KiB
MAX_FILE_BYTES_RANGE = (256, 1 * MiB)
MAX_BYTES = 256 * KiB
MAX_BYTES_RANGE = (1 * KiB, 16 * MiB)
MAX_IMPORT_DEPTH = 4
MAX_IMPORT_DEPTH_RANGE = (0, 16)
TOUCHES_PER_TOOL_CALL = 256
TOUCHES_PER_TOOL_CALL_RANGE = (1, 10_000)
COMMAND_TIMEOUT_MS = 5_000
DOCUMENT_TIMEOUT_MS = 15_000
TIMEOUT_MS_RANGE = (1, 600_000)
COMMAND_OUTPUT_BYTES = 16 * KiB
DOCUMENT_OUTPUT_BYTES = 64 * KiB
OUTPUT_BYTES_RANGE = (1, 4 * MiB)
MAX_ROOTS = 64

PromptCommands = Literal["off", "trusted", "on"]
Root = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
Roots = Annotated[list[Root], msgspec.Meta(max_length=MAX_ROOTS)]


FileBytes = Annotated[int, msgspec.Meta(ge=MAX_FILE_BYTES_RANGE[0], le=MAX_FILE_BYTES_RANGE[1])]
TotalBytes = Annotated[int, msgspec.Meta(ge=MAX_BYTES_RANGE[0], le=MAX_BYTES_RANGE[1])]
Depth = Annotated[int, msgspec.Meta(ge=MAX_IMPORT_DEPTH_RANGE[0], le=MAX_IMPORT_DEPTH_RANGE[1])]
Touches = Annotated[
    int, msgspec.Meta(ge=TOUCHES_PER_TOOL_CALL_RANGE[0], le=TOUCHES_PER_TOOL_CALL_RANGE[1])
]
TimeoutMs = Annotated[int, msgspec.Meta(ge=TIMEOUT_MS_RANGE[0], le=TIMEOUT_MS_RANGE[1])]
OutputBytes = Annotated[int, msgspec.Meta(ge=OUTPUT_BYTES_RANGE[0], le=OUTPUT_BYTES_RANGE[1])]


class ForeignConfig(Section, kw_only=True):
    """Where other agents keep skills and templates; off unless `enabled`."""

    enabled: bool = False  # read the skills and templates of the hosts below
    # Claude Code's: `~/.claude/skills`, `~/.claude/commands`, a workspace's `.claude/skills`
    # and `.claude/commands`.
    claude: bool = True
    # Codex's: `$CODEX_HOME/skills` (else `~/.codex/skills`), `~/.codex/prompts`, a
    # workspace's `.codex/skills`.
    codex: bool = True
    copilot: bool = True  # Copilot's: `~/.copilot/skills`, a workspace's `.github/skills`
    # Workspaces whose own folders are read (and trusted); any other workspace's are
    # skipped with `foreign_untrusted_root`.
    trusted_roots: Roots = []


class InstructionsConfig(Section, kw_only=True):
    # One instruction file; the rest is cut (`instructions_file_truncated`).
    max_file_bytes: FileBytes = MAX_FILE_BYTES
    # All active instructions of a run; the least specific are left out
    # (`instructions_budget`).
    max_bytes: TotalBytes = MAX_BYTES
    # `@path` imports nested at most this deep; a deeper one is dropped
    # (`instructions_import_depth`).
    max_import_depth: Depth = MAX_IMPORT_DEPTH
    import_roots: Roots = []  # directories a workspace file's `@path` imports may read besides it
    # Paths one tool call can activate instructions for; the rest are ignored
    # (`instructions_touch_limit`).
    touches_per_tool_call: Touches = TOUCHES_PER_TOOL_CALL
    skill_roots: Roots = []  # directories of skill folders (`NAME/SKILL.md`), trusted
    template_roots: Roots = []  # directories of prompt templates (`NAME.md`), trusted
    # Whether `!`cmd`` in templates and skills runs: never, for trusted documents only, always.
    prompt_commands: PromptCommands = "trusted"
    # Time one prompt command has; then it is stopped.
    command_timeout_ms: TimeoutMs = COMMAND_TIMEOUT_MS
    # All prompt commands of one template or skill; past it the rest are skipped.
    document_timeout_ms: TimeoutMs = DOCUMENT_TIMEOUT_MS
    # Output kept from one prompt command; the rest is cut with a marker.
    command_output_bytes: OutputBytes = COMMAND_OUTPUT_BYTES
    # Output kept from all prompt commands of one document; past it the rest are skipped.
    document_output_bytes: OutputBytes = DOCUMENT_OUTPUT_BYTES
    # Skills and templates of Claude Code, Codex and Copilot (off by default).
    foreign: ForeignConfig = section(ForeignConfig)
