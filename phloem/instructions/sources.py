"""Where skills and templates come from: configured roots, and other agents' folders.

Configured roots (`[instructions] skill_roots`, `template_roots`) are explicit consent:
always read, always trusted. With `[instructions.foreign] enabled`, the folders Claude
Code, Codex and Copilot keep are read too (each host can be switched off):

| host    | user level                                   | repository level     |
| ------- | -------------------------------------------- | -------------------- |
| claude  | `~/.claude/skills`, `~/.claude/commands`     | `.claude/skills`, `.claude/commands` |
| codex   | `$CODEX_HOME/skills` (else `~/.codex/skills`), `~/.codex/prompts` | `.codex/skills` |
| copilot | `~/.copilot/skills`                          | `.github/skills`     |

User-level folders are trusted. A repository's folders are read only when the workspace
is exactly one of `trusted_roots` (after resolving symlinks); otherwise they are
skipped with a `foreign_untrusted_root` warning, so a cloned repository cannot hand the
model skills or commands on its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from phloem.instructions.settings import InstructionsConfig

__all__ = ["Root", "skill_roots", "template_roots", "workspace_trusted"]

Warn = Callable[..., None]


@dataclass(frozen=True)
class Root:
    path: str
    source: str
    trusted: bool
    foreign: bool


def workspace_trusted(config: InstructionsConfig, workdir: str | None) -> bool:
    """Is `workdir` exactly one of the trusted roots?"""
    if workdir is None:
        return False
    real = os.path.realpath(workdir)
    return any(
        os.path.realpath(os.path.expanduser(r)) == real for r in config.foreign.trusted_roots
    )


def _configured(roots: list[str]) -> list[Root]:
    return [Root(os.path.expanduser(r), "config", True, False) for r in roots]


def _foreign(
    config: InstructionsConfig,
    workdir: str | None,
    home: str,
    user: dict[str, list[str]],
    repo: dict[str, list[str]],
    warn: Warn,
) -> list[Root]:
    foreign = config.foreign
    if not foreign.enabled:
        return []
    hosts = [h for h in ("claude", "codex", "copilot") if getattr(foreign, h)]
    trusted = workspace_trusted(config, workdir)
    out: list[Root] = []
    for host in hosts:
        for rel in repo.get(host, []):
            if workdir is None:
                continue
            path = os.path.join(workdir, rel)
            if not os.path.isdir(path):
                continue
            if trusted:
                out.append(Root(path, f"{host}:repo", True, True))
            else:
                warn(
                    "foreign_untrusted_root",
                    "skipped: the workspace is not one of [instructions.foreign] trusted_roots",
                    path=rel,
                )
    for host in hosts:
        for path in user.get(host, []):
            if os.path.isdir(path):
                out.append(Root(path, f"{host}:user", True, True))
    return out


def skill_roots(
    config: InstructionsConfig, workdir: str | None, home: str, warn: Warn
) -> list[Root]:
    """Configured skill roots, then the repository's (if trusted), then the user's."""
    codex_home = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
    user = {
        "claude": [os.path.join(home, ".claude", "skills")],
        "codex": [os.path.join(codex_home, "skills")],
        "copilot": [os.path.join(home, ".copilot", "skills")],
    }
    repo = {"claude": [".claude/skills"], "codex": [".codex/skills"], "copilot": [".github/skills"]}
    return _configured(config.skill_roots) + _foreign(config, workdir, home, user, repo, warn)


def template_roots(
    config: InstructionsConfig, workdir: str | None, home: str, warn: Warn
) -> list[Root]:
    """Configured template roots, then the repository's (if trusted), then the user's."""
    codex_home = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
    user = {
        "claude": [os.path.join(home, ".claude", "commands")],
        "codex": [os.path.join(codex_home, "prompts")],
    }
    repo = {"claude": [".claude/commands"]}
    return _configured(config.template_roots) + _foreign(config, workdir, home, user, repo, warn)
