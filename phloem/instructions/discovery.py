"""Instruction discovery: the files users already write for other agents, in order.

`InstructionContext(workdir)` snapshots, for one session or run:

1. user files: `~/.claude/CLAUDE.md`, `~/.codex/AGENTS.md`, `~/.github/copilot-instructions.md`;
2. each ancestor directory's `AGENT.md`, `AGENTS.md`, `CLAUDE.md`, outermost first;
3. the workspace root's `AGENT.md`, `AGENTS.md`, `CLAUDE.md`, `.claude/CLAUDE.md`,
   `.codex/AGENTS.md`, `.github/copilot-instructions.md`;
4. path-scoped rules — `.github/instructions/*.instructions.md` (`applyTo` globs) and
   `.claude/rules/*.md` (`paths` globs; a Claude rule without `paths` is always on);
5. nested `AGENT.md` / `AGENTS.md` / `CLAUDE.md` below the root.

1-3 (and unconditional rules) are active from the start; path-scoped rules and nested
files activate when `touch(paths)` reports that a tool call touched a matching path (a
file under the nested file's directory). Documents are ordered least specific first:
user, ancestors (outer to inner), root, rules, nested (shallow to deep); ties by path.
A document whose real path or content hash was already taken is skipped; a rule or
nested file that leads outside the workspace (a symlink) is skipped with a warning. Each file is
read up to `max_file_bytes` (cut with a warning); `@path` imports are expanded
(`documents.Importer`). `assemble()` renders the active documents for the model; when
they exceed `max_bytes`, the least specific are left out first, each with a warning
naming it. `policy()` is the intersection of the active documents' front-matter tool
policies (`allowed-tools`, `disallowed-tools`), whether or not the budget kept their text.
Warnings go to the context's `Warnings` and to the log. Discovery reads files only: it
never runs a command.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from phloem.base.logs import get_logger
from phloem.instructions.documents import Document, Importer, read_text, within
from phloem.instructions.frontmatter import split_front_matter, tool_names
from phloem.instructions.policy import ToolPolicy
from phloem.instructions.settings import InstructionsConfig
from phloem.protocols.warnings import Warnings
from phloem.tools.ignorerules import PathGlob, split_glob_list

__all__ = ["MAX_RULE_FILES", "InstructionContext"]

log = get_logger("phloem.instructions")

USER_FILES = (".claude/CLAUDE.md", ".codex/AGENTS.md", ".github/copilot-instructions.md")
DIR_FILES = ("AGENT.md", "AGENTS.md", "CLAUDE.md")
ROOT_FILES = (
    *DIR_FILES,
    ".claude/CLAUDE.md",
    ".codex/AGENTS.md",
    ".github/copilot-instructions.md",
)
MAX_RULE_FILES = 256
MAX_NESTED_DIRS = 10_000

_TIER = {"user": 0, "ancestor": 1, "root": 2, "rule": 3, "nested": 4}


class InstructionContext:
    """The instruction documents of one session or run (thread-safe)."""

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        *,
        config: InstructionsConfig | None = None,
        home: str | os.PathLike[str] | None = None,
        warnings: Warnings | None = None,
    ) -> None:
        self.config = config or InstructionsConfig()
        self.root = os.path.realpath(os.fspath(workdir))
        if not os.path.isdir(self.root):
            raise ValueError(f"workdir must be an existing directory: {os.fspath(workdir)}")
        self.home = os.path.realpath(os.fspath(home) if home is not None else str(Path.home()))
        self.warnings = warnings if warnings is not None else Warnings()
        self._lock = threading.Lock()
        self._active: list[Document] = []
        self._reals: set[str] = set()
        self._digests: set[str] = set()
        self._rules: list[Document] = []
        self._checked_dirs: set[str] = {""}
        self._budget_warned: set[str] = set()
        imports = [os.path.expanduser(r) for r in self.config.import_roots]
        self._importer = Importer(
            self.home, self.config.max_import_depth, self.config.max_file_bytes, self.warn
        )
        self._user_roots = [self.home, *imports]
        self._workspace_roots = [self.root, *imports]
        self._discover()

    # -- warnings --------------------------------------------------------------------------

    def warn(
        self, code: str, message: str, *, path: str | None = None, line: int | None = None
    ) -> None:
        warning = self.warnings.warn(code, message, path=path, line=line)
        log.warning(warning.code, detail=warning.message, path=path, line=line)

    # -- discovery -------------------------------------------------------------------------

    def _discover(self) -> None:
        for index, name in enumerate(USER_FILES):
            self._take(
                os.path.join(self.home, name), "~/" + name, "user", (0, index), self._user_roots
            )
        ancestors = list(reversed(Path(self.root).parents))
        for depth, directory in enumerate(ancestors):
            for index, name in enumerate(DIR_FILES):
                path = os.path.join(str(directory), name)
                roots = [str(directory), *self._workspace_roots[1:]]
                self._take(path, path, "ancestor", (depth, index), roots)
        for index, name in enumerate(ROOT_FILES):
            root = self._workspace_roots
            self._take(os.path.join(self.root, name), name, "root", (0, index), root)
        self._load_rules()

    def _load_rules(self) -> None:
        found: list[tuple[str, str]] = []
        copilot = Path(self.root, ".github", "instructions")
        claude = Path(self.root, ".claude", "rules")
        for base, pattern, kind in (
            (copilot, "*.instructions.md", "copilot"),
            (claude, "*.md", "claude"),
        ):
            if base.is_dir() and not base.is_symlink():
                for path in sorted(base.rglob(pattern)):
                    found.append((str(path), kind))
        if len(found) > MAX_RULE_FILES:
            self.warn(
                "instructions_rule_limit",
                f"{len(found)} rule files; only the first {MAX_RULE_FILES} are read",
            )
            found = found[:MAX_RULE_FILES]
        for found_path, kind in found:
            shown = os.path.relpath(found_path, self.root)
            doc = self._read(found_path, shown, "rule", (0, 0), self._workspace_roots, kind)
            if doc is None:
                continue
            if doc.globs is None and kind == "claude":
                self._activate(doc)
            elif doc.globs is not None:
                self._rules.append(doc)

    def _read(
        self,
        path: str,
        shown: str,
        scope: str,
        rank: tuple[int, int],
        roots: list[str],
        rule_kind: str = "",
    ) -> Document | None:
        if not os.path.lexists(path):
            return None
        real = os.path.realpath(path)
        if scope in ("rule", "nested") and not within(real, self.root):
            self.warn(
                "instructions_outside_root",
                "skipped: it leads outside the workspace (a symlink)",
                path=shown,
            )
            return None
        read = read_text(real, self.config.max_file_bytes)
        if isinstance(read, str):
            self.warn("instructions_unreadable", f"skipped: {read}", path=shown)
            return None
        if real in self._reals or read.digest in self._digests:
            return None  # a duplicate of an active document: not read twice, not warned
        if read.truncated:
            self.warn(
                "instructions_file_truncated",
                f"{read.size} bytes; only the first {self.config.max_file_bytes} are used",
                path=shown,
            )
        header, body, problem = split_front_matter(read.text)
        if problem is not None:
            self.warn("instructions_front_matter", str(problem), path=shown, line=problem.line)
        globs = None
        if rule_kind:
            raw = header.get("applyTo") if rule_kind == "copilot" else header.get("paths")
            patterns = _glob_list(raw)
            if patterns:
                globs = PathGlob(patterns)
                for bad in globs.errors:
                    self.warn("instructions_bad_glob", f"glob skipped: {bad.text}", path=shown)
            elif rule_kind == "copilot":
                return None  # a Copilot file without applyTo is never applied on its own
        text = self._importer.expand(body, real, shown, roots)
        return Document(
            shown=shown,
            real=real,
            scope=scope,
            rank=(_TIER[scope] * 1_000_000 + rank[0], rank[1], shown),
            text=text,
            digest=read.digest,
            policy=self._policy(header, shown),
            globs=globs,
        )

    def _policy(self, header: dict[str, object], shown: str) -> ToolPolicy | None:
        allowed = tool_names(header.get("allowed-tools"))
        disallowed = tool_names(header.get("disallowed-tools"))
        if allowed is None and disallowed is None:
            return None
        for listed in (allowed, disallowed):
            if listed is not None and listed.bad:
                self.warn(
                    "instructions_bad_tool_name", f"ignored: {', '.join(listed.bad)}", path=shown
                )
        if allowed is not None and allowed.scoped:
            self.warn(
                "instructions_scoped_tool",
                "argument-scoped allow entries grant nothing (policies are by tool name): "
                + ", ".join(sorted(allowed.scoped)),
                path=shown,
            )
        deny = frozenset() if disallowed is None else disallowed.names | disallowed.scoped
        return ToolPolicy(None if allowed is None else allowed.names, deny)

    def _take(
        self, path: str, shown: str, scope: str, rank: tuple[int, int], roots: list[str]
    ) -> Document | None:
        doc = self._read(path, shown, scope, rank, roots)
        if doc is not None and self._activate(doc):
            return doc
        return None

    def _activate(self, doc: Document) -> bool:
        """Make `doc` active unless its real path or content was already taken."""
        if doc.real in self._reals or doc.digest in self._digests:
            return False
        self._reals.add(doc.real)
        self._digests.add(doc.digest)
        self._active.append(doc)
        self._active.sort(key=lambda d: d.rank)
        return True

    # -- activation on touch ---------------------------------------------------------------

    def touch(self, paths: Iterable[str]) -> list[Document]:
        """Activate what the touched workspace paths bring in; returns the new documents."""
        added: list[Document] = []
        with self._lock:
            for raw in paths:
                rel = self._relative(raw)
                if rel is None:
                    continue
                added.extend(self._nested_for(rel))
                for rule in list(self._rules):
                    assert rule.globs is not None
                    if rule.globs.matches(rel) and self._activate(rule):
                        self._rules.remove(rule)
                        added.append(rule)
        return added

    def _relative(self, path: str) -> str | None:
        if not isinstance(path, str) or not path or "\x00" in path:
            return None
        joined = os.path.normpath(os.path.join(self.root, path))
        if not within(joined, self.root):
            return None
        rel = os.path.relpath(joined, self.root)
        return "" if rel == "." else rel

    def _nested_for(self, rel: str) -> list[Document]:
        parts = rel.split("/") if rel else []
        is_dir = os.path.isdir(os.path.join(self.root, rel))
        dirs = ["/".join(parts[:i]) for i in range(1, len(parts) + (1 if is_dir else 0))]
        added: list[Document] = []
        for directory in dirs:
            if directory in self._checked_dirs or len(self._checked_dirs) >= MAX_NESTED_DIRS:
                continue
            self._checked_dirs.add(directory)
            depth = directory.count("/") + 1
            for index, name in enumerate(DIR_FILES):
                shown = f"{directory}/{name}"
                path = os.path.join(self.root, shown)
                doc = self._read(path, shown, "nested", (depth, index), self._workspace_roots)
                if doc is not None and self._activate(doc):
                    added.append(doc)
        return added

    # -- what the model sees ---------------------------------------------------------------

    def documents(self) -> list[Document]:
        """The active documents, least specific first."""
        with self._lock:
            return list(self._active)

    def assemble(self) -> str:
        """The active documents rendered in order, within `max_bytes` (least specific
        dropped first, each drop warned once)."""
        with self._lock:
            docs = list(self._active)
            rendered = [d.render() for d in docs]
            sizes = [len(r.encode()) + 1 for r in rendered]
            total = sum(sizes)
            first = 0
            while total > self.config.max_bytes and first < len(docs):
                total -= sizes[first]
                dropped = docs[first]
                if dropped.real not in self._budget_warned:
                    self._budget_warned.add(dropped.real)
                    self.warn(
                        "instructions_budget",
                        f"left out: the active instructions exceed max_bytes "
                        f"({self.config.max_bytes}); least specific go first",
                        path=dropped.shown,
                    )
                first += 1
            return "\n".join(rendered[first:])

    def policy(self) -> ToolPolicy:
        """The intersection of the active documents' front-matter tool policies."""
        policy = ToolPolicy()
        with self._lock:
            for doc in self._active:
                if doc.policy is not None:
                    policy = policy.intersect(doc.policy)
        return policy


def _glob_list(value: object) -> list[str]:
    if isinstance(value, str):
        return split_glob_list(value)
    if isinstance(value, list):
        return [v.strip() for v in value if isinstance(v, str) and v.strip()]
    return []
