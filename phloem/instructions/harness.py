"""What the instructions feature adds to each turn of a harness session.

`SessionInstructions` is held by the sessions service. For every turn it gives a
`TurnExtras`: the interceptors of the turn (tool policy, confirmation, instructions, in
that order, after the tree's chain), the skill tools to add, the session's warnings
collector, and `expand(prompt)` for prompt commands (`/name args`). A session keeps one
`InstructionContext` for as long as the daemon runs (at most `MAX_SESSIONS`, the least
recently used forgotten first), so instructions activated by one turn's tool calls stay
active in the next; after a restart they are discovered again. Skills and templates are
read afresh for every turn (so a new skill is there at the next turn). Warnings of a session
(discovery, templates, skills) are collected per session and returned with the next
turn's `AskResult.warnings`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from phloem.instructions.confirm import ConfirmationInterceptor
from phloem.instructions.context import run_interceptors
from phloem.instructions.discovery import InstructionContext
from phloem.instructions.policy import ToolPolicy
from phloem.instructions.settings import InstructionsConfig
from phloem.instructions.skills import SkillCatalog, skill_tools
from phloem.instructions.templates import TemplateCatalog
from phloem.models.interceptors import Interceptor
from phloem.protocols.runs import ConfirmRequest
from phloem.protocols.warnings import RunWarning, Warnings
from phloem.tools.contract import Tool

__all__ = ["MAX_SESSIONS", "SessionInstructions", "TurnExtras"]

MAX_SESSIONS = 1_024


@dataclass
class TurnExtras:
    interceptors: tuple[Interceptor, ...] = ()
    tools: tuple[Tool, ...] = ()
    confirm: ConfirmationInterceptor | None = None
    warnings: Warnings = field(default_factory=Warnings)
    templates: TemplateCatalog | None = None
    variables: dict[str, Any] = field(default_factory=dict)

    def expand(self, prompt: str) -> str:
        """`/name args` expanded through the session's templates (others unchanged)."""
        if self.templates is None:
            return prompt
        return self.templates.expand_prompt(prompt, self.variables)

    def check(self, prompt: str) -> None:
        """`unknown_template` now when `prompt` is a command naming no template."""
        if self.templates is not None:
            self.templates.check_prompt(prompt)

    def drain(self) -> list[RunWarning]:
        return list(self.warnings.drain())


class SessionInstructions:
    """Per-session instruction contexts and per-turn extras (thread-safe)."""

    def __init__(self, config: InstructionsConfig | None = None) -> None:
        self.config = config or InstructionsConfig()
        self._lock = threading.Lock()
        self._contexts: OrderedDict[tuple[str, str], InstructionContext] = OrderedDict()

    def context(self, session_id: str, workdir: str) -> InstructionContext:
        key = (session_id, os.path.realpath(workdir))
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                context = InstructionContext(workdir, config=self.config)
                self._contexts[key] = context
            self._contexts.move_to_end(key)
            while len(self._contexts) > MAX_SESSIONS:
                self._contexts.popitem(last=False)
            return context

    def forget(self, session_id: str) -> None:
        with self._lock:
            for key in [k for k in self._contexts if k[0] == session_id]:
                del self._contexts[key]

    def turn(
        self,
        session_id: str,
        workdir: str,
        agent: Any,
        *,
        send: Callable[[ConfirmRequest], None],
        tools: Sequence[Tool] = (),
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] = (),
    ) -> TurnExtras:
        """The extras of one turn of `agent` (a `[sessions.agents.NAME]` entry with
        `instructions`, `skills`, `templates`, `tools_allow`, `tools_deny`,
        `confirmation`, `confirmation_timeout_s`); `tools` are the turn's other tools."""
        policy = ToolPolicy.of(agent.tools_allow, agent.tools_deny).intersect(
            ToolPolicy.of(tools_allow, tools_deny)
        )
        context = self.context(session_id, workdir) if agent.instructions else None
        warnings = context.warnings if context is not None else Warnings()
        extra_tools: tuple[Tool, ...] = ()
        if agent.skills:
            catalog = SkillCatalog(self.config, workdir, warnings=warnings)
            extra_tools = tuple(skill_tools(catalog))
        confirm = None
        if agent.confirmation:
            table = {t.name: t for t in (*tools, *extra_tools)}
            confirm = ConfirmationInterceptor(
                send, tools=table, timeout_s=agent.confirmation_timeout_s
            )
        templates = (
            TemplateCatalog(self.config, workdir, warnings=warnings) if agent.templates else None
        )
        chain = run_interceptors(
            policy=None if policy.unrestricted else policy, context=context, confirmation=confirm
        )
        return TurnExtras(
            interceptors=tuple(chain),
            tools=extra_tools,
            confirm=confirm,
            warnings=warnings,
            templates=templates,
            variables={"session_id": session_id},
        )
