"""Skills discovery (configured, foreign user-level, repository roots trusted or not),
the list_skills / load_skill toolset, ambiguity and staleness."""

from __future__ import annotations

import pytest

from phloem.instructions.settings import ForeignConfig, InstructionsConfig
from phloem.instructions.skills import MAX_RESOURCE_BYTES, SkillCatalog, skill_tools
from phloem.tools import ToolContext, Workspace
from tests.actors.instructions.conftest import Trees

pytestmark = pytest.mark.timeout(30)


def skill(description: str, body: str = "body", extra: str = "") -> str:
    return f"---\ndescription: {description}\n{extra}---\n{body}"


def foreign(trees: Trees, *, trusted: bool, **hosts: bool) -> InstructionsConfig:
    roots = [str(trees.ws)] if trusted else []
    return InstructionsConfig(foreign=ForeignConfig(enabled=True, trusted_roots=roots, **hosts))


def names(catalog: SkillCatalog) -> list[str]:
    return [s.qualified for s in catalog.skills()]


def test_configured_roots_hold_skill_folders(trees: Trees) -> None:
    trees.write("/" + str(trees.base / "skills/lint/SKILL.md"), skill("Lint the code"))
    trees.write("/" + str(trees.base / "skills/notes.txt"), "not a skill")
    catalog = SkillCatalog(InstructionsConfig(skill_roots=[str(trees.base / "skills")]))
    assert names(catalog) == ["config:lint"]


def test_foreign_skills_are_read_only_when_enabled(trees: Trees) -> None:
    trees.write("~/.claude/skills/a/SKILL.md", skill("A"))
    assert names(SkillCatalog(InstructionsConfig(), trees.ws)) == []
    assert names(SkillCatalog(foreign(trees, trusted=False), trees.ws)) == ["claude:user:a"]


def test_every_host_folder_is_found_and_hosts_can_be_switched_off(
    trees: Trees, monkeypatch: pytest.MonkeyPatch
) -> None:
    trees.write("~/.claude/skills/c1/SKILL.md", skill("c1"))
    trees.write("~/.codex/skills/x1/SKILL.md", skill("x1"))
    trees.write("~/.copilot/skills/p1/SKILL.md", skill("p1"))
    trees.write(".claude/skills/c2/SKILL.md", skill("c2"))
    trees.write(".codex/skills/x2/SKILL.md", skill("x2"))
    trees.write(".github/skills/p2/SKILL.md", skill("p2"))
    catalog = SkillCatalog(foreign(trees, trusted=True), trees.ws)
    assert names(catalog) == [
        "claude:repo:c2",
        "codex:repo:x2",
        "copilot:repo:p2",
        "claude:user:c1",
        "codex:user:x1",
        "copilot:user:p1",
    ]
    catalog = SkillCatalog(foreign(trees, trusted=True, codex=False, copilot=False), trees.ws)
    assert names(catalog) == ["claude:repo:c2", "claude:user:c1"]
    monkeypatch.setenv("CODEX_HOME", str(trees.base / "codex-home"))
    trees.write("/" + str(trees.base / "codex-home/skills/x3/SKILL.md"), skill("x3"))
    assert "codex:user:x3" in names(SkillCatalog(foreign(trees, trusted=False), trees.ws))


def test_repository_skills_need_an_exact_trusted_root(trees: Trees) -> None:
    trees.write(".claude/skills/repo/SKILL.md", skill("from the repo"))
    untrusted = SkillCatalog(foreign(trees, trusted=False), trees.ws)
    assert names(untrusted) == []
    assert [w.code for w in untrusted.warnings.drain()] == ["foreign_untrusted_root"]
    parent_only = InstructionsConfig(
        foreign=ForeignConfig(enabled=True, trusted_roots=[str(trees.ws.parent)])
    )
    assert names(SkillCatalog(parent_only, trees.ws)) == []  # exact, not "beneath"
    assert names(SkillCatalog(foreign(trees, trusted=True), trees.ws)) == ["claude:repo:repo"]


def test_same_bytes_are_one_skill_and_different_content_is_ambiguous(trees: Trees) -> None:
    trees.write("~/.claude/skills/fmt/SKILL.md", skill("Format", "same"))
    trees.write("~/.codex/skills/fmt/SKILL.md", skill("Format", "same"))
    trees.write("~/.claude/skills/test/SKILL.md", skill("Test", "claude way"))
    trees.write("~/.codex/skills/test/SKILL.md", skill("Test", "codex way"))
    catalog = SkillCatalog(foreign(trees, trusted=False), trees.ws)
    assert names(catalog) == ["claude:user:fmt", "claude:user:test", "codex:user:test"]
    assert catalog.load("fmt")["body"] == "same"
    [fmt] = [s for s in catalog.skills() if s.name == "fmt"]
    assert fmt.sources == ["claude:user", "codex:user"]  # provenance merged, not dropped
    assert catalog.load("codex:user:fmt")["name"] == "claude:user:fmt"  # either id reaches it
    trees.write("~/.codex/skills/fmt/notes.md", "codex notes\n")
    resource = skill_tools(catalog)[2]
    assert resource.run({"name": "fmt", "path": "notes.md"}, ToolContext())["error"] == (
        "ambiguous_skill"  # the folders differ: resources need the qualified id
    )
    codex = resource.run({"name": "codex:user:fmt", "path": "notes.md"}, ToolContext())
    assert codex["content"] == "codex notes\n"
    load = skill_tools(catalog)[1]
    failed = load.run({"name": "test"}, ToolContext())
    assert failed["error"] == "ambiguous_skill"
    assert "claude:user:test, codex:user:test" in failed["message"]
    assert load.run({"name": "codex:user:test"}, ToolContext())["body"] == "codex way"
    assert load.run({"name": "nope"}, ToolContext())["error"] == "unknown_skill"


def test_invalid_skills_are_skipped_with_warnings(trees: Trees) -> None:
    root = trees.base / "skills"
    trees.write("/" + str(root / "ok/SKILL.md"), skill("fine"))
    trees.write("/" + str(root / "nodesc/SKILL.md"), "---\nname: nodesc\n---\nbody")
    trees.write("/" + str(root / "Bad_Name/SKILL.md"), skill("bad name"))
    trees.write("/" + str(root / "broken/SKILL.md"), "---\ndescription: [x\n---\n")
    catalog = SkillCatalog(InstructionsConfig(skill_roots=[str(root)]))
    assert names(catalog) == ["config:ok"]
    assert [w.code for w in catalog.warnings.drain()] == ["skill_invalid"] * 3


def test_the_toolset_lists_and_loads_and_is_empty_without_skills(trees: Trees) -> None:
    assert skill_tools(SkillCatalog(InstructionsConfig(), trees.ws)) == []
    root = trees.base / "skills"
    trees.write(
        "/" + str(root / "greet/SKILL.md"),
        skill("Greets", "Say hello to {{arguments}} and $1.", "allowed-tools: []\n"),
    )
    list_skills, load_skill, _ = skill_tools(
        SkillCatalog(InstructionsConfig(skill_roots=[str(root)]))
    )
    assert list_skills.read_only and load_skill.read_only  # never asks for confirmation
    assert list_skills.run({}, ToolContext()) == {
        "skills": [
            {"name": "greet", "description": "Greets", "source": "config", "sources": ["config"]}
        ]
    }
    loaded = load_skill.run({"name": "greet", "arguments": "Ann Bob"}, ToolContext())
    assert loaded == {
        "name": "config:greet",
        "description": "Greets",
        "body": "Say hello to Ann Bob and Ann.",
        "tool_policy": {"allow": [], "deny": []},  # explicit empty: no further tool
    }


def test_a_skill_changed_since_discovery_is_stale(trees: Trees) -> None:
    root = trees.base / "skills"
    path = trees.write("/" + str(root / "s/SKILL.md"), skill("S", "one"))
    catalog = SkillCatalog(InstructionsConfig(skill_roots=[str(root)]))
    path.write_text(skill("S", "two"))
    assert skill_tools(catalog)[1].run({"name": "s"}, ToolContext())["error"] == "stale"


def test_a_skill_gets_the_harness_variables(trees: Trees) -> None:
    root = trees.base / "skills"
    trees.write(
        "/" + str(root / "s1/SKILL.md"), skill("S", "Work in {{workdir}} ({{session_id}}).")
    )
    catalog = SkillCatalog(InstructionsConfig(skill_roots=[str(root)]), trees.ws)
    load_skill = skill_tools(catalog)[1]
    loaded = load_skill.run({"name": "s1"}, ToolContext(Workspace(trees.ws), session="sess-9"))
    assert loaded["body"] == f"Work in {trees.ws.resolve()} (sess-9)."
    unknown = trees.write("/" + str(root / "s2/SKILL.md"), skill("T", "{{nope}}"))
    assert unknown.exists()
    again = skill_tools(SkillCatalog(InstructionsConfig(skill_roots=[str(root)]), trees.ws))[1]
    assert again.run({"name": "s2"}, ToolContext())["error"] == "arguments"


def test_skill_resources_are_bounded_utf8_files_beneath_the_skill_folder(trees: Trees) -> None:
    root = trees.base / "skills"
    trees.write("/" + str(root / "r/SKILL.md"), skill("R", "See ref/guide.md"))
    trees.write("/" + str(root / "r/ref/guide.md"), "the guide\n")
    trees.write("/" + str(root / "secret.txt"), "outside\n")
    edge = root / "r/edge.txt"
    edge.write_bytes(b"a" * MAX_RESOURCE_BYTES)
    (root / "r/over.txt").write_bytes(b"a" * (MAX_RESOURCE_BYTES + 1))
    (root / "r/bin.dat").write_bytes(b"\xff\xfe\x00")
    (root / "r/link").symlink_to(root / "secret.txt")
    tool = skill_tools(SkillCatalog(InstructionsConfig(skill_roots=[str(root)])))[2]
    assert tool.name == "load_skill_resource" and tool.read_only

    def load(path: str) -> dict[str, object]:
        return tool.run({"name": "r", "path": path}, ToolContext())

    assert load("ref/guide.md") == {
        "name": "config:r",
        "path": "ref/guide.md",
        "content": "the guide\n",
    }
    assert len(str(load("edge.txt")["content"])) == MAX_RESOURCE_BYTES
    assert load("over.txt")["error"] == "too_large"
    assert load("bin.dat")["error"] == "binary"
    assert load("../secret.txt")["error"] == "outside_root"
    assert load("link")["error"] == "outside_root"  # a symlink leading out
    assert load("/etc/passwd")["error"] == "arguments"
    assert load("nothing.md")["error"] == "missing"
    assert tool.run({"name": "zzz", "path": "a"}, ToolContext())["error"] == "unknown_skill"
