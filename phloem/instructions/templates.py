"""Prompt templates with `{{var}}` slots, and prompt commands (`/name args`).

A template is a Markdown file `NAME.md` in a template root (`sources.template_roots`):
optional front matter (`description`, `allowed-tools` — the tools a turn that expands
the template may still call, intersected into the turn's policy like a skill's), then the
body. Its name is the
file name without `.md`. `render(name, arguments, variables)` fills the slots:
`{{arguments}}` is the whole argument string, `{{1}}` … `{{9}}` its shell-split words
(empty when missing), other names come from `variables` (`workdir`, `session_id`, ...);
a slot naming nothing known is an `invalid_argument` error. Templates found in other
agents' folders also take their spelling, `$ARGUMENTS` and `$1` … `$9`. Then the body's
prompt commands run (`commands.PromptCommands`, subject to `prompt_commands` and trust).

`expand_prompt("/name args")` is the prompt-command form: a prompt starting with
`/name` (then a space or the end) expands the template `name`; a prompt that does not
start that way is returned as it is (`//...` loses one slash: a literal `/`); `/name`
with no such template is `unknown_template`. The first root holding a name wins; a
later one with other content is reported (`template_shadowed`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from phloem.instructions.catalog import WorkspaceCatalog
from phloem.instructions.documents import read_text
from phloem.instructions.frontmatter import split_front_matter, tool_names
from phloem.instructions.sources import template_roots
from phloem.protocols.errors import ErrorKind, PhloemError

__all__ = ["MAX_TEMPLATES", "Template", "TemplateCatalog", "fill_slots"]


MAX_TEMPLATES = 1_024
MAX_TEMPLATE_BYTES = 256 * 1024
MAX_ARGUMENT_CHARS = 100_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_COMMAND = re.compile(r"^/([A-Za-z0-9][A-Za-z0-9_.:-]{0,63})(?:[ \t\r\n]+(.*))?\Z", re.DOTALL)
_SLOT = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*|[1-9])\s*\}\}")
_DOLLAR = re.compile(r"\$(ARGUMENTS|[1-9])\b")


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    body: str
    source: str
    path: str
    trusted: bool
    foreign: bool
    # `allowed-tools` of the front matter (host names mapped: Read -> read); None: no
    # restriction. A turn that expands the template is narrowed to it.
    allow: frozenset[str] | None = None


def _words(arguments: str) -> list[str]:
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def fill_slots(
    text: str, arguments: str, variables: Mapping[str, Any], *, what: str, dollar: bool = False
) -> str:
    """`text` with its `{{var}}` slots (and with `dollar`, `$ARGUMENTS` / `$N`) filled."""
    words = _words(arguments)
    values: dict[str, str] = {str(k): str(v) for k, v in variables.items()}
    values["arguments"] = arguments

    def slot(match: re.Match[str]) -> str:
        key = match.group(1)
        if key.isdigit():
            index = int(key) - 1
            return words[index] if index < len(words) else ""
        if key not in values:
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{what}: no value for {{{{{key}}}}}")
        return values[key]

    text = _SLOT.sub(slot, text)
    if dollar:
        text = _DOLLAR.sub(lambda m: arguments if m.group(1) == "ARGUMENTS" else slot(m), text)
    return text


class TemplateCatalog(WorkspaceCatalog):
    """The templates of one workspace (a snapshot taken at construction)."""

    def _load(self) -> None:
        self._templates: dict[str, Template] = {}
        for root in template_roots(self.config, self.workdir, self.home, self.warn):
            self._scan(root.path, root.source, root.trusted, root.foreign)

    def _scan(self, root: str, source: str, trusted: bool, foreign: bool) -> None:
        if not os.path.isdir(root):
            if source == "config":
                self.warn("template_root_missing", "not a directory", path=root)
            return
        for entry in sorted(os.listdir(root)):
            if not entry.endswith(".md"):
                continue
            name = entry[:-3]
            path = os.path.join(root, entry)
            if not _NAME.match(name) or not os.path.isfile(path):
                continue
            if len(self._templates) >= MAX_TEMPLATES:
                self.warn("template_limit", f"more than {MAX_TEMPLATES} templates; rest skipped")
                return
            read = read_text(path, MAX_TEMPLATE_BYTES)
            if isinstance(read, str) or read.truncated:
                why = read if isinstance(read, str) else f"over {MAX_TEMPLATE_BYTES} bytes"
                self.warn("template_unreadable", f"skipped: {why}", path=path)
                continue
            header, body, problem = split_front_matter(read.text)
            if problem is not None:
                self.warn("template_front_matter", str(problem), path=path, line=problem.line)
            described = header.get("description")
            listed = tool_names(header.get("allowed-tools"))
            if listed is not None and (listed.scoped or listed.bad):
                self.warn(
                    "template_scoped_tool",
                    "entries that are not plain tool names grant nothing: "
                    + ", ".join(sorted(listed.scoped) + listed.bad),
                    path=path,
                )
            template = Template(
                name,
                described if isinstance(described, str) else "",
                body,
                source,
                path,
                trusted,
                foreign,
                listed.names if listed is not None else None,
            )
            existing = self._templates.get(name)
            if existing is not None:
                if existing.body != body:
                    self.warn(
                        "template_shadowed",
                        f"/{name} from {existing.source} ({existing.path}) wins",
                        path=path,
                    )
                continue
            self._templates[name] = template

    def list(self) -> list[Template]:
        return [self._templates[name] for name in sorted(self._templates)]

    def get(self, name: str) -> Template:
        template = self._templates.get(name)
        if template is None:
            raise PhloemError(ErrorKind.UNKNOWN_TEMPLATE, f"no template named {name[:80]!r}")
        return template

    def render(
        self, name: str, arguments: str = "", variables: Mapping[str, Any] | None = None
    ) -> str:
        """The template `name` with its slots filled and its prompt commands run."""
        if len(arguments) > MAX_ARGUMENT_CHARS:
            raise PhloemError(
                ErrorKind.INVALID_ARGUMENT, f"arguments must be at most {MAX_ARGUMENT_CHARS} chars"
            )
        template = self.get(name)
        text = fill_slots(
            template.body,
            arguments,
            {"workdir": self.workdir or "", **(variables or {})},
            what=f"template {name!r}",
            dollar=template.foreign,
        )
        return self.commands.expand(text, trusted=template.trusted, shown=template.path)

    def check_prompt(self, prompt: str) -> None:
        """`unknown_template` when `prompt` is a prompt command naming no template."""
        match = None if prompt.startswith("//") else _COMMAND.match(prompt)
        if match is not None:
            self.get(match.group(1))

    def prompt_template(self, prompt: str) -> Template | None:
        """The template a prompt command names (None: `prompt` is not a command)."""
        match = None if prompt.startswith("//") else _COMMAND.match(prompt)
        return self.get(match.group(1)) if match is not None else None

    def expand_prompt(self, prompt: str, variables: Mapping[str, Any] | None = None) -> str:
        """`/name args` expanded; any other prompt unchanged (see the module docstring)."""
        if prompt.startswith("//"):
            return prompt[1:]  # `//tmp is full`: a literal slash, not a command
        match = _COMMAND.match(prompt)
        if match is None:
            return prompt
        return self.render(match.group(1), (match.group(2) or "").strip(), variables)
