"""Skills: folders with a `SKILL.md`, listed to the model and loaded on demand.

A skill is a directory holding `SKILL.md`: front matter with `name` (lower-case letters,
digits and hyphens, ≤ 64; defaults to the folder name), `description` (required) and
optional `allowed-tools`, then the body — the instructions the model reads when it
loads the skill. `SkillCatalog` snapshots the skills of the roots `sources.skill_roots`
names (configured roots; other agents' folders with `[instructions.foreign] enabled`,
repository ones only under an exact trusted root). The same name with identical bytes
from several roots is one skill, every source kept (`Skill.also`; each qualified id
reaches it, and resources need the qualified id when the folders differ); with different
content the plain name is ambiguous and each is reachable by its qualified id
`source:name` (`claude:user:review`).

`skill_tools(catalog)` is the model-facing toolset — none when there is no skill:

- `list_skills {}` → `{"skills": [{"name", "description", "source", "sources"}]}`
  (`sources`: every root the same skill was found under — its provenance, kept);
- `load_skill {name, arguments=""}` → `{"name", "description", "body"}` plus
  `"tool_policy": {"allow": [...], "deny": []}` when the skill names `allowed-tools`
  (the tool-policy interceptor narrows the turn to them: an explicit empty list denies
  every further tool). The body is read again and checked against the digest taken at
  discovery (changed since: `stale`), its `{{arguments}}`
  slots — and the harness variables `{{workdir}}` and `{{session_id}}`, as templates get
  them — are filled and its prompt commands run (`commands.PromptCommands`). Failures:
  `unknown_skill`, `ambiguous_skill`, `stale`, `io`;
- `load_skill_resource {name, path}` → `{"name", "path", "content"}`: a file of the
  skill's folder (`path` relative to it), regular UTF-8 text of at most
  `MAX_RESOURCE_BYTES`, confined beneath the folder (symlinks resolved). Failures:
  `unknown_skill`, `ambiguous_skill`, `arguments`, `outside_root`, `missing`, `binary`,
  `too_large`, `io`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from phloem.base.logs import get_logger
from phloem.instructions.catalog import WorkspaceCatalog
from phloem.instructions.documents import read_text, within
from phloem.instructions.frontmatter import split_front_matter, tool_names
from phloem.instructions.sources import skill_roots
from phloem.instructions.templates import fill_slots
from phloem.protocols.errors import PhloemError
from phloem.tools.contract import JSON, Tool, ToolContext, object_schema
from phloem.tools.errors import ToolFailure

__all__ = ["MAX_SKILLS", "Skill", "SkillCatalog", "skill_tools"]

log = get_logger("phloem.instructions")

MAX_SKILLS = 1_024
MAX_SKILL_BYTES = 256 * 1024
MAX_DESCRIPTION_CHARS = 1_024
MAX_RESOURCE_BYTES = 256 * 1024
"""The largest file `load_skill_resource` reads (a larger one is `too_large`)."""
_SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str
    source: str
    trusted: bool
    digest: str
    allow: frozenset[str] | None
    # The same skill (same name and bytes) found under other roots too: (source, path)
    # each — its provenance is kept, not dropped.
    also: tuple[tuple[str, str], ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.source}:{self.name}"

    @property
    def sources(self) -> list[str]:
        """Every source the skill was found under, the first one first."""
        return [self.source, *(source for source, _ in self.also)]

    def folder(self, qualified: str | None = None) -> str:
        """The skill's folder: that of the source `qualified` names (None: the first)."""
        for source, path in self.also:
            if qualified == f"{source}:{self.name}":
                return os.path.dirname(path)
        return os.path.dirname(self.path)


class SkillCatalog(WorkspaceCatalog):
    """The skills of one workspace (a snapshot taken at construction)."""

    def _load(self) -> None:
        self._all: list[Skill] = []
        for root in skill_roots(self.config, self.workdir, self.home, self.warn):
            self._scan(root.path, root.source, root.trusted)

    def _scan(self, root: str, source: str, trusted: bool) -> None:
        if not os.path.isdir(root):
            if source == "config":
                self.warn("skill_root_missing", "not a directory", path=root)
            return
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry, "SKILL.md")
            if not os.path.isfile(path):
                continue
            if len(self._all) >= MAX_SKILLS:
                self.warn("skill_limit", f"more than {MAX_SKILLS} skills; the rest are skipped")
                return
            skill = self._read(path, entry, source, trusted)
            if skill is not None:
                self._add(skill)

    def _read(self, path: str, folder: str, source: str, trusted: bool) -> Skill | None:
        read = read_text(path, MAX_SKILL_BYTES)
        if isinstance(read, str) or read.truncated:
            why = read if isinstance(read, str) else f"over {MAX_SKILL_BYTES} bytes"
            self.warn("skill_invalid", f"skipped: {why}", path=path)
            return None
        header, _, problem = split_front_matter(read.text)
        if problem is not None:
            self.warn("skill_invalid", f"skipped: {problem}", path=path, line=problem.line)
            return None
        name = header.get("name", folder)
        description = header.get("description")
        if not isinstance(name, str) or not _SKILL_NAME.match(name):
            self.warn("skill_invalid", f"skipped: bad name {name!r}", path=path)
            return None
        if not isinstance(description, str) or not description.strip():
            self.warn("skill_invalid", "skipped: no description", path=path)
            return None
        listed = tool_names(header.get("allowed-tools"))
        allow = None
        if listed is not None:
            allow = listed.names
            if listed.scoped or listed.bad:
                self.warn(
                    "skill_scoped_tool",
                    "entries that are not plain tool names grant nothing: "
                    + ", ".join(sorted(listed.scoped) + listed.bad),
                    path=path,
                )
        return Skill(
            name,
            description.strip()[:MAX_DESCRIPTION_CHARS],
            os.path.realpath(path),
            source,
            trusted,
            read.digest,
            allow,
        )

    def _add(self, skill: Skill) -> None:
        for index, other in enumerate(self._all):
            if other.name == skill.name and (
                other.digest == skill.digest or other.path == skill.path
            ):
                # The same skill reached twice: one skill, both provenances kept.
                seen = {(other.source, other.path), *other.also}
                if (skill.source, skill.path) not in seen:
                    also = (*other.also, (skill.source, skill.path))
                    self._all[index] = dataclasses.replace(other, also=also)
                return
        self._all.append(skill)

    # -- lookups ---------------------------------------------------------------------------

    def skills(self) -> list[Skill]:
        return list(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def find(self, name: str) -> Skill:
        """The skill `name` (plain or qualified); `ToolFailure` when none or ambiguous."""
        exact = [
            s
            for s in self._all
            if s.qualified == name or name in (f"{src}:{s.name}" for src, _ in s.also)
        ]
        if exact:
            return exact[0]
        named = [s for s in self._all if s.name == name]
        if not named:
            raise ToolFailure("unknown_skill", f"no skill named {name[:80]!r}")
        if len(named) > 1:
            ids = ", ".join(s.qualified for s in named)
            raise ToolFailure(
                "ambiguous_skill", f"{name!r} names different skills; use one of: {ids}"
            )
        return named[0]

    def load(
        self, name: str, arguments: str = "", variables: Mapping[str, Any] | None = None
    ) -> JSON:
        """The body of skill `name`, checked and expanded (see the module docstring);
        `variables` are the harness's (`workdir`, `session_id`), as templates get them."""
        skill = self.find(name)
        read = read_text(skill.path, MAX_SKILL_BYTES)
        if isinstance(read, str):
            raise ToolFailure("io", f"skill {skill.name!r}: {read}")
        if read.digest != skill.digest:
            raise ToolFailure("stale", f"skill {skill.name!r} changed since it was discovered")
        _, body, _ = split_front_matter(read.text)
        try:
            values = {"workdir": self.workdir or "", **(variables or {})}
            body = fill_slots(body, arguments, values, what=f"skill {skill.name!r}", dollar=True)
        except PhloemError as exc:
            raise ToolFailure("arguments", exc.message) from None
        body = self.commands.expand(body, trusted=skill.trusted, shown=skill.path)
        result: JSON = {"name": skill.qualified, "description": skill.description, "body": body}
        if skill.allow is not None:
            result["tool_policy"] = {"allow": sorted(skill.allow), "deny": []}
        return result

    def resource(self, name: str, path: str) -> JSON:
        """A file of skill `name`'s folder: regular UTF-8 text of at most
        `MAX_RESOURCE_BYTES`, confined beneath the folder (see the module docstring)."""
        skill = self.find(name)
        folders = {skill.folder(), *(os.path.dirname(path) for _, path in skill.also)}
        if len(folders) > 1 and name == skill.name:
            ids = ", ".join(f"{source}:{skill.name}" for source in skill.sources)
            raise ToolFailure(
                "ambiguous_skill",
                f"{name!r} is found in several folders (their files may differ); use one of: {ids}",
            )
        root = skill.folder(name)
        if not path or os.path.isabs(path) or "\x00" in path:
            raise ToolFailure("arguments", "path must be relative to the skill's folder")
        real = os.path.realpath(os.path.join(root, path))
        if not within(real, root) or real == root:
            raise ToolFailure("outside_root", f"{path[:200]!r} is not inside skill {skill.name!r}")
        if not os.path.exists(real):
            raise ToolFailure("missing", f"skill {skill.name!r} has no {path[:200]!r}")
        read = read_text(real, MAX_RESOURCE_BYTES)
        if isinstance(read, str):
            code = "binary" if "UTF-8" in read or "NUL" in read else "io"
            raise ToolFailure(code, f"skill {skill.name!r}: {path[:200]!r}: {read}")
        if read.truncated:
            raise ToolFailure(
                "too_large",
                f"skill {skill.name!r}: {path[:200]!r} is over {MAX_RESOURCE_BYTES} bytes",
            )
        relative = os.path.relpath(real, root)
        return {"name": skill.qualified, "path": relative, "content": read.text}


class ListSkillsTool(Tool):
    name = "list_skills"
    description = "List the skills you can load with load_skill: name, description, source."
    input_schema = object_schema({}, [])
    read_only = True
    needs_workspace = False

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        skills: list[dict[str, Any]] = [
            {
                "name": s.name,
                "description": s.description,
                "source": s.source,
                "sources": s.sources,
            }
            for s in self.catalog.skills()
        ]
        return {"skills": skills}


class LoadSkillTool(Tool):
    name = "load_skill"
    description = (
        "Load a skill's instructions by name (from list_skills) and follow them. Loading a "
        "skill may restrict the tools you can use for the rest of the turn."
    )
    input_schema = object_schema(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": 200},
            "arguments": {"type": "string", "default": "", "maxLength": 10_000},
        },
        ["name"],
    )
    read_only = True
    needs_workspace = False

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        variables = {"session_id": ctx.session}
        if ctx.has_workspace:
            variables["workdir"] = str(ctx.workspace.root)
        return self.catalog.load(args["name"], args["arguments"], variables)


class LoadSkillResourceTool(Tool):
    name = "load_skill_resource"
    description = (
        "Read a file that a skill's instructions refer to, by the skill's name and the "
        "file's path relative to the skill's folder (UTF-8 text only)."
    )
    input_schema = object_schema(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": 200},
            "path": {"type": "string", "minLength": 1, "maxLength": 4096},
        },
        ["name", "path"],
    )
    read_only = True
    needs_workspace = False

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        return self.catalog.resource(args["name"], args["path"])


def skill_tools(catalog: SkillCatalog) -> list[Tool]:
    """`list_skills`, `load_skill` and `load_skill_resource` over `catalog`; none when
    it holds no skill."""
    if not len(catalog):
        return []
    return [ListSkillsTool(catalog), LoadSkillTool(catalog), LoadSkillResourceTool(catalog)]
