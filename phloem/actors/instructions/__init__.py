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

from phloem.actors.instructions.confirm import ConfirmationInterceptor, is_mutating
from phloem.actors.instructions.context import (
    InstructionsInterceptor,
    run_interceptors,
    touched_paths,
)
from phloem.actors.instructions.discovery import InstructionContext
from phloem.actors.instructions.documents import Document
from phloem.actors.instructions.policy import ToolPolicy, ToolPolicyInterceptor, TurnPolicy
from phloem.actors.instructions.protocol import ConfirmRequest
from phloem.actors.instructions.settings import ForeignConfig, InstructionsConfig
from phloem.actors.instructions.skills import Skill, SkillCatalog, skill_tools
from phloem.actors.instructions.templates import Template, TemplateCatalog

__all__ = [
    "ConfirmRequest",
    "ConfirmationInterceptor",
    "Document",
    "ForeignConfig",
    "InstructionContext",
    "InstructionsConfig",
    "InstructionsInterceptor",
    "Skill",
    "SkillCatalog",
    "Template",
    "TemplateCatalog",
    "ToolPolicy",
    "ToolPolicyInterceptor",
    "TurnPolicy",
    "is_mutating",
    "run_interceptors",
    "skill_tools",
    "touched_paths",
]
