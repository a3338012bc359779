"""What the coding agent knows and may do: instruction discovery, skills, templates,
prompt commands, tool policy and confirmation.

- `InstructionContext` (discovery): the AGENTS.md / CLAUDE.md / Copilot files users
  already write, activated lazily on touch, ordered, deduplicated, capped, with imports;
- `SkillCatalog` + `skill_tools` (skills): `list_skills` / `load_skill` for the model;
- `TemplateCatalog` (templates): `{{var}}` templates and `/name args` prompt commands,
  whose `!`cmd`` directives run under `prompt_commands = off | trusted | on`;
- `ToolPolicy`, `ToolPolicyInterceptor`, `ConfirmationInterceptor`,
  `InstructionsInterceptor`, `run_interceptors` (policy): interceptors on the tree's chain
  (`phloem.models.interceptors`) that filter and refuse tools, ask before mutating ones
  run, and hand the model its instructions;
- `InstructionsConfig` (settings): the `[instructions]` section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.instructions.confirm import (
        ConfirmationInterceptor as ConfirmationInterceptor,
        is_mutating as is_mutating,
    )
    from phloem.instructions.context import (
        InstructionsInterceptor as InstructionsInterceptor,
        run_interceptors as run_interceptors,
        touched_paths as touched_paths,
    )
    from phloem.instructions.discovery import (
        InstructionContext as InstructionContext,
    )
    from phloem.instructions.documents import (
        Document as Document,
    )
    from phloem.instructions.policy import (
        ToolPolicy as ToolPolicy,
        ToolPolicyInterceptor as ToolPolicyInterceptor,
        TurnPolicy as TurnPolicy,
    )
    from phloem.instructions.settings import (
        ForeignConfig as ForeignConfig,
        InstructionsConfig as InstructionsConfig,
    )
    from phloem.instructions.skills import (
        Skill as Skill,
        SkillCatalog as SkillCatalog,
        skill_tools as skill_tools,
    )
    from phloem.instructions.templates import (
        Template as Template,
        TemplateCatalog as TemplateCatalog,
    )

_EXPORTS: dict[str, str] = {
    "ConfirmationInterceptor": "phloem.instructions.confirm",
    "Document": "phloem.instructions.documents",
    "ForeignConfig": "phloem.instructions.settings",
    "InstructionContext": "phloem.instructions.discovery",
    "InstructionsConfig": "phloem.instructions.settings",
    "InstructionsInterceptor": "phloem.instructions.context",
    "Skill": "phloem.instructions.skills",
    "SkillCatalog": "phloem.instructions.skills",
    "Template": "phloem.instructions.templates",
    "TemplateCatalog": "phloem.instructions.templates",
    "ToolPolicy": "phloem.instructions.policy",
    "ToolPolicyInterceptor": "phloem.instructions.policy",
    "TurnPolicy": "phloem.instructions.policy",
    "is_mutating": "phloem.instructions.confirm",
    "run_interceptors": "phloem.instructions.context",
    "skill_tools": "phloem.instructions.skills",
    "touched_paths": "phloem.instructions.context",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the one export table)

# Imported on first use: reading the `[instructions]` settings (every config load) does
# not pull in discovery, YAML and the bash tool.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
