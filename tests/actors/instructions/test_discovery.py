"""Instruction discovery: every location, lazy activation, order, dedup, caps, budget,
imports and front-matter policy — on fake home and workspace trees."""

from __future__ import annotations

import os

import pytest

from phloem.instructions.discovery import InstructionContext
from phloem.instructions.policy import ToolPolicy
from phloem.instructions.settings import InstructionsConfig
from tests.actors.instructions.conftest import Trees

pytestmark = pytest.mark.timeout(30)


def ctx(trees: Trees, **cfg: object) -> InstructionContext:
    return InstructionContext(trees.ws, config=InstructionsConfig(**cfg))  # type: ignore[arg-type]


def shown(context: InstructionContext) -> list[str]:
    return [d.shown for d in context.documents()]


def codes(context: InstructionContext) -> list[str]:
    return [w.code for w in context.warnings.drain()]


def test_every_static_location_is_found_in_the_documented_order(trees: Trees) -> None:
    trees.write("~/.claude/CLAUDE.md", "user claude")
    trees.write("~/.codex/AGENTS.md", "user codex")
    trees.write("~/.github/copilot-instructions.md", "user copilot")
    outer = trees.ws.parent
    trees.write(str(outer.parent / "AGENTS.md"), "grandparent agents")
    trees.write(str(outer / "AGENT.md"), "parent agent")
    trees.write(str(outer / "CLAUDE.md"), "parent claude")
    for rel in (
        "AGENT.md",
        "AGENTS.md",
        "CLAUDE.md",
        ".claude/CLAUDE.md",
        ".codex/AGENTS.md",
        ".github/copilot-instructions.md",
    ):
        trees.write(rel, f"root {rel}")
    context = ctx(trees)
    assert shown(context) == [
        "~/.claude/CLAUDE.md",
        "~/.codex/AGENTS.md",
        "~/.github/copilot-instructions.md",
        str(outer.parent / "AGENTS.md"),
        str(outer / "AGENT.md"),
        str(outer / "CLAUDE.md"),
        "AGENT.md",
        "AGENTS.md",
        "CLAUDE.md",
        ".claude/CLAUDE.md",
        ".codex/AGENTS.md",
        ".github/copilot-instructions.md",
    ]
    text = context.assemble()
    assert (
        text.index("user claude")
        < text.index("grandparent agents")
        < text.index("parent agent")
        < text.index("root AGENTS.md")
        < text.index("root .github/copilot-instructions.md")
    )
    assert text.startswith("Instructions from ~/.claude/CLAUDE.md (user):\n\nuser claude\n")


def test_nested_files_activate_only_when_a_path_below_them_is_touched(trees: Trees) -> None:
    trees.write("AGENTS.md", "root")
    trees.write("src/AGENTS.md", "src rules")
    trees.write("src/deep/CLAUDE.md", "deep rules")
    trees.write("src/deep/x.py", "")
    trees.write("docs/AGENTS.md", "docs rules")
    context = ctx(trees)
    assert shown(context) == ["AGENTS.md"]
    added = context.touch(["src/deep/x.py"])
    assert [d.shown for d in added] == ["src/AGENTS.md", "src/deep/CLAUDE.md"]
    assert context.touch(["src/deep/x.py"]) == []  # once only
    context.touch(["docs"])  # a touched directory counts too
    assert shown(context) == ["AGENTS.md", "docs/AGENTS.md", "src/AGENTS.md", "src/deep/CLAUDE.md"]


def test_touches_outside_the_workspace_activate_nothing(trees: Trees) -> None:
    trees.write("~/AGENTS.md", "home file")
    context = ctx(trees)
    assert context.touch(["../../home/x", "/etc/passwd", "", "a\x00b"]) == []


def test_path_scoped_rules_activate_on_a_matching_touch(trees: Trees) -> None:
    trees.write(".github/instructions/py.instructions.md", "---\napplyTo: '**/*.py'\n---\npy rule")
    trees.write(".github/instructions/none.instructions.md", "no applyTo: never on its own")
    trees.write(".claude/rules/docs.md", "---\npaths:\n  - docs/**\n---\ndocs rule")
    trees.write(".claude/rules/always.md", "an unconditional claude rule")
    context = ctx(trees)
    assert shown(context) == [".claude/rules/always.md"]
    context.touch(["README.md"])
    assert shown(context) == [".claude/rules/always.md"]
    context.touch(["src/app.py"])
    assert shown(context) == [".claude/rules/always.md", ".github/instructions/py.instructions.md"]
    context.touch(["docs/guide/intro.md"])
    assert ".claude/rules/docs.md" in shown(context)
    assert "applyTo" not in context.assemble()  # front matter is not shown to the model


def test_rules_come_after_the_root_and_before_nested_files(trees: Trees) -> None:
    trees.write("AGENTS.md", "root")
    trees.write("src/AGENTS.md", "nested")
    trees.write(".claude/rules/py.md", "---\npaths: ['*.py']\n---\nrule")
    context = ctx(trees)
    context.touch(["src/a.py"])
    assert shown(context) == ["AGENTS.md", ".claude/rules/py.md", "src/AGENTS.md"]


def test_duplicates_by_real_path_and_by_content_are_taken_once(trees: Trees) -> None:
    trees.write("AGENTS.md", "shared rules")
    os.symlink("AGENTS.md", trees.ws / "CLAUDE.md")  # the same file twice
    trees.write(".codex/AGENTS.md", "shared rules")  # the same bytes elsewhere
    trees.write("~/.claude/CLAUDE.md", "shared rules")  # ... and in the home: first wins
    context = ctx(trees)
    assert shown(context) == ["~/.claude/CLAUDE.md"]
    assert context.assemble().count("shared rules") == 1


def test_a_file_over_the_cap_is_cut_with_a_warning(trees: Trees) -> None:
    trees.write("AGENTS.md", "é" * 400)  # 800 bytes
    context = ctx(trees, max_file_bytes=301)
    (doc,) = context.documents()
    assert doc.text == "é" * 150  # cut at a character boundary
    assert codes(context) == ["instructions_file_truncated"]


def test_the_default_file_cap_is_16_kib(trees: Trees) -> None:
    trees.write("AGENTS.md", "x" * (16 * 1024 + 10))
    (doc,) = ctx(trees).documents()
    assert len(doc.text) == 16 * 1024


def test_the_budget_drops_least_specific_documents_first_with_a_warning(trees: Trees) -> None:
    trees.write("~/.claude/CLAUDE.md", "u" * 600)
    trees.write("AGENTS.md", "r" * 600)
    trees.write("src/AGENTS.md", "n" * 600)
    context = ctx(trees, max_bytes=1400)
    context.touch(["src/x"])
    text = context.assemble()
    assert "u" * 600 not in text and "r" * 600 in text and "n" * 600 in text
    warnings = context.warnings.drain()
    assert [(w.code, w.path) for w in warnings] == [("instructions_budget", "~/.claude/CLAUDE.md")]
    context.assemble()  # warned once per document, not per model call
    assert context.warnings.drain() == ()


def test_imports_expand_in_place_and_respect_code(trees: Trees) -> None:
    trees.write("docs/style.md", "STYLE")
    trees.write(
        "AGENTS.md",
        "See @docs/style.md.\n`@docs/style.md` stays\n```\n@docs/style.md\n```\nmail a@b.md\n",
    )
    (doc,) = ctx(trees).documents()
    assert doc.text == "See STYLE.\n`@docs/style.md` stays\n```\n@docs/style.md\n```\nmail a@b.md\n"


def test_a_workspace_file_may_not_import_from_the_home(trees: Trees) -> None:
    trees.write("~/secret.md", "SECRET")
    trees.write("AGENTS.md", "x @~/secret.md")
    trees.write("~/.claude/CLAUDE.md", "user @~/secret.md")
    context = ctx(trees)
    text = context.assemble()
    assert "user SECRET" in text and "x @~/secret.md" in text
    warnings = context.warnings.drain()
    assert [(w.code, w.path, w.line) for w in warnings] == [
        ("instructions_import_outside", "AGENTS.md", 1)
    ]


def test_configured_import_roots_widen_the_confinement(trees: Trees) -> None:
    shared = trees.base / "shared"
    trees.write(str(shared / "team.md"), "TEAM")
    trees.write("AGENTS.md", f"@{shared}/team.md")
    context = ctx(trees, import_roots=[str(shared)])
    assert "TEAM" in context.assemble()


def test_imports_nest_four_deep_and_a_fifth_level_is_dropped(trees: Trees) -> None:
    for level in range(1, 6):
        trees.write(f"i{level}.md", f"L{level} @i{level + 1}.md" if level < 5 else "L5")
    trees.write("AGENTS.md", "L0 @i1.md")
    context = ctx(trees)
    (doc,) = context.documents()
    assert doc.text == "L0 L1 L2 L3 L4 "
    assert codes(context) == ["instructions_import_depth"]


def test_import_cycles_are_detected(trees: Trees) -> None:
    trees.write("a.md", "A @b.md")
    trees.write("b.md", "B @a.md")
    trees.write("AGENTS.md", "root @a.md")
    context = ctx(trees)
    (doc,) = context.documents()
    assert doc.text == "root A B @a.md"
    assert codes(context) == ["instructions_import_cycle"]


def test_front_matter_policies_intersect_and_denials_win(trees: Trees) -> None:
    trees.write("AGENTS.md", "---\nallowed-tools: [Read, Grep, Bash, Glob]\n---\nroot")
    trees.write(
        "src/CLAUDE.md", "---\nallowed-tools: read, bash, find\ndisallowed-tools: [Bash]\n---\nsrc"
    )
    context = ctx(trees)
    assert context.policy() == ToolPolicy(frozenset({"read", "grep", "bash", "find"}))
    context.touch(["src/a.py"])
    policy = context.policy()
    assert policy == ToolPolicy(frozenset({"read", "bash", "find"}), frozenset({"bash"}))
    assert policy.allows("read") and not policy.allows("bash") and not policy.allows("grep")


def test_argument_scoped_allow_entries_grant_nothing(trees: Trees) -> None:
    trees.write("AGENTS.md", "---\nallowed-tools: Read, Bash(git status:*)\n---\nroot")
    context = ctx(trees)
    assert context.policy().allow == frozenset({"read"})
    assert codes(context) == ["instructions_scoped_tool"]


def test_broken_front_matter_is_warned_with_its_line_and_the_file_still_used(trees: Trees) -> None:
    trees.write("AGENTS.md", "---\nallowed-tools: [read\n---\nbody")
    context = ctx(trees)
    assert "body" in context.assemble()
    (warning,) = context.warnings.drain()
    assert warning.code == "instructions_front_matter" and warning.path == "AGENTS.md"
    assert warning.line is not None and warning.line >= 2


def test_unreadable_files_are_skipped_with_a_warning(trees: Trees) -> None:
    (trees.ws / "AGENTS.md").write_bytes(b"\xff\xfe not utf-8")
    (trees.ws / "CLAUDE.md").mkdir()
    context = ctx(trees)
    assert context.documents() == []
    assert codes(context) == ["instructions_unreadable", "instructions_unreadable"]


def test_a_document_expands_at_most_64_imports(trees: Trees) -> None:
    trees.write("i.md", "I")
    trees.write("AGENTS.md", " ".join(["@i.md"] * 65))
    context = ctx(trees)
    (doc,) = context.documents()
    assert doc.text == " ".join(["I"] * 64 + ["@i.md"])
    assert codes(context) == ["instructions_import_limit"]


def test_at_most_256_rule_files_are_read(trees: Trees) -> None:
    for i in range(257):
        trees.write(f".claude/rules/r{i:03}.md", f"rule {i}")
    context = ctx(trees)
    assert len(context.documents()) == 256
    assert codes(context) == ["instructions_rule_limit"]


def test_nested_files_and_rules_leading_outside_the_workspace_are_skipped(trees: Trees) -> None:
    outside = trees.base / "elsewhere"
    trees.write(str(outside / "AGENTS.md"), "outside rules")
    trees.write(str(outside / "rule.md"), "---\npaths: ['**']\n---\noutside rule")
    os.symlink(outside, trees.ws / "link")
    trees.write(".claude/rules/.keep", "")
    os.symlink(outside / "rule.md", trees.ws / ".claude/rules/out.md")
    context = ctx(trees)
    context.touch(["link/file.txt", "link"])
    assert "outside" not in context.assemble()
    assert codes(context) == ["instructions_outside_root", "instructions_outside_root"]
