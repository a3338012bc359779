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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from phloem.actors.instructions.confirm import (
        ConfirmationInterceptor as ConfirmationInterceptor,
        is_mutating as is_mutating,
    )
    from phloem.actors.instructions.context import (
        InstructionsInterceptor as InstructionsInterceptor,
        run_interceptors as run_interceptors,
        touched_paths as touched_paths,
    )
    from phloem.actors.instructions.discovery import (
        InstructionContext as InstructionContext,
    )
    from phloem.actors.instructions.documents import (
        Document as Document,
    )
    from phloem.actors.instructions.policy import (
        ToolPolicy as ToolPolicy,
        ToolPolicyInterceptor as ToolPolicyInterceptor,
        TurnPolicy as TurnPolicy,
    )
    from phloem.actors.instructions.protocol import (
        ConfirmRequest as ConfirmRequest,
    )
    from phloem.actors.instructions.settings import (
        ForeignConfig as ForeignConfig,
        InstructionsConfig as InstructionsConfig,
    )
    from phloem.actors.instructions.skills import (
        Skill as Skill,
        SkillCatalog as SkillCatalog,
        skill_tools as skill_tools,
    )
    from phloem.actors.instructions.templates import (
        Template as Template,
        TemplateCatalog as TemplateCatalog,
    )

_EXPORTS: dict[str, str] = {
    "ConfirmRequest": "phloem.actors.instructions.protocol",
    "ConfirmationInterceptor": "phloem.actors.instructions.confirm",
    "Document": "phloem.actors.instructions.documents",
    "ForeignConfig": "phloem.actors.instructions.settings",
    "InstructionContext": "phloem.actors.instructions.discovery",
    "InstructionsConfig": "phloem.actors.instructions.settings",
    "InstructionsInterceptor": "phloem.actors.instructions.context",
    "Skill": "phloem.actors.instructions.skills",
    "SkillCatalog": "phloem.actors.instructions.skills",
    "Template": "phloem.actors.instructions.templates",
    "TemplateCatalog": "phloem.actors.instructions.templates",
    "ToolPolicy": "phloem.actors.instructions.policy",
    "ToolPolicyInterceptor": "phloem.actors.instructions.policy",
    "TurnPolicy": "phloem.actors.instructions.policy",
    "is_mutating": "phloem.actors.instructions.confirm",
    "run_interceptors": "phloem.actors.instructions.context",
    "skill_tools": "phloem.actors.instructions.skills",
    "touched_paths": "phloem.actors.instructions.context",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605


def __getattr__(name: str) -> Any:
    """Import on first use: reading the `[instructions]` settings (every config load)
    does not pull in discovery, YAML and the bash tool."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
