"""Prompt templates (`{{var}}` slots), prompt commands (`/name args`) and the commands in
them (`!`cmd``), in each mode, with their time and output bounds — real bash."""

from __future__ import annotations

import time

import pytest

from phloem.instructions.settings import ForeignConfig, InstructionsConfig
from phloem.instructions.templates import TemplateCatalog, fill_slots
from phloem.protocols.errors import PhloemError
from tests.actors.instructions.conftest import Trees
from tests.helpers import raises_kind

pytestmark = pytest.mark.timeout(60)


def catalog(trees: Trees, **cfg: object) -> TemplateCatalog:
    cfg.setdefault("template_roots", [str(trees.base / "templates")])
    return TemplateCatalog(InstructionsConfig(**cfg), trees.ws)  # type: ignore[arg-type]


def template(trees: Trees, name: str, text: str) -> None:
    trees.write("/" + str(trees.base / "templates" / f"{name}.md"), text)


def codes(cat: TemplateCatalog) -> list[str]:
    return [w.code for w in cat.warnings.drain()]


def test_slots_take_the_arguments_their_words_and_variables() -> None:
    text = "{{arguments}} | {{1}} | {{ 2 }} | {{3}} | {{workdir}}"
    filled = fill_slots(text, 'a "b c"', {"workdir": "/w"}, what="t")
    assert filled == 'a "b c" | a | b c |  | /w'
    with pytest.raises(PhloemError, match=r"^invalid_argument: t: no value for \{\{nope\}\}$"):
        fill_slots("{{nope}}", "", {}, what="t")


def test_a_prompt_command_expands_its_template(trees: Trees) -> None:
    template(trees, "review", "---\ndescription: Review a file\n---\nReview {{1}} for {{2}}.")
    cat = catalog(trees)
    assert [(t.name, t.description) for t in cat.list()] == [("review", "Review a file")]
    assert cat.expand_prompt("/review app.py bugs") == "Review app.py for bugs."
    assert cat.expand_prompt("/review") == "Review  for ."
    assert cat.expand_prompt("plain prompt /review x") == "plain prompt /review x"
    assert cat.expand_prompt("/usr/bin is a directory") == "/usr/bin is a directory"
    assert raises_kind(cat.expand_prompt, "/nope x") == "unknown_template"
    assert cat.expand_prompt("//tmp is full") == "/tmp is full"


def test_foreign_templates_come_from_the_claude_and_codex_folders(trees: Trees) -> None:
    trees.write("~/.claude/commands/fix.md", "Fix $ARGUMENTS now ($1)")
    trees.write("~/.codex/prompts/plan.md", "Plan {{arguments}}")
    trees.write(".claude/commands/repo.md", "repo command")
    cfg = InstructionsConfig(foreign=ForeignConfig(enabled=True))
    cat = TemplateCatalog(cfg, trees.ws)
    assert [(t.name, t.source) for t in cat.list()] == [
        ("fix", "claude:user"),
        ("plan", "codex:user"),
    ]  # the repository's own commands need a trusted root
    assert cat.expand_prompt("/fix the bug") == "Fix the bug now (the)"
    trusted = InstructionsConfig(foreign=ForeignConfig(enabled=True, trusted_roots=[str(trees.ws)]))
    assert "repo" in [t.name for t in TemplateCatalog(trusted, trees.ws).list()]


def test_the_first_root_wins_and_a_different_later_one_is_reported(trees: Trees) -> None:
    template(trees, "x", "configured")
    trees.write("~/.claude/commands/x.md", "foreign")
    cat = catalog(trees, foreign=ForeignConfig(enabled=True))
    assert cat.render("x") == "configured"
    assert codes(cat) == ["template_shadowed"]


COMMANDS = "Branch: !`echo main`\n```!\nprintf 'one\\ntwo\\n'\n```\nend"


def test_commands_run_in_trusted_mode_for_configured_templates(trees: Trees) -> None:
    template(trees, "status", COMMANDS)
    cat = catalog(trees)
    assert cat.render("status") == "Branch: main\none\ntwo\n\nend"
    assert codes(cat) == []


def test_commands_do_not_run_when_off(trees: Trees) -> None:
    template(trees, "status", "!`touch ran`")
    cat = catalog(trees, prompt_commands="off")
    assert cat.render("status") == "!`touch ran`"
    assert not (trees.ws / "ran").exists()
    assert codes(cat) == ["prompt_command_skipped"]


def test_trusted_mode_skips_untrusted_repository_templates_and_on_runs_them(trees: Trees) -> None:
    trees.write(".claude/commands/repo.md", "!`touch ran && echo ran`")
    trusted_root = ForeignConfig(enabled=True, trusted_roots=[str(trees.ws)])
    # trusted mode, the workspace is a trusted root: runs
    cat = TemplateCatalog(InstructionsConfig(foreign=trusted_root), trees.ws)
    assert cat.render("repo") == "ran"
    (trees.ws / "ran").unlink()
    # a user-level template is trusted in trusted mode
    trees.write("~/.claude/commands/mine.md", "!`echo mine`")
    cat = TemplateCatalog(InstructionsConfig(foreign=ForeignConfig(enabled=True)), trees.ws)
    assert cat.render("mine") == "mine"
    # `on` runs even what is not trusted: an untrusted document is built by hand here,
    # since untrusted repositories' templates are not even listed
    on = TemplateCatalog(
        InstructionsConfig(
            prompt_commands="on", template_roots=[str(trees.ws / ".claude/commands")]
        ),
        trees.ws,
    )
    assert on.commands.expand("!`echo yes`", trusted=False, shown="t") == "yes"
    trusted = TemplateCatalog(InstructionsConfig(), trees.ws)
    assert trusted.commands.expand("!`touch ran`", trusted=False, shown="t") == "!`touch ran`"
    assert not (trees.ws / "ran").exists()
    assert [w.code for w in trusted.warnings.drain()] == ["prompt_command_skipped"]


def test_a_command_is_stopped_at_its_timeout(trees: Trees) -> None:
    template(trees, "slow", "a !`sleep 30; echo late` b")
    cat = catalog(trees, command_timeout_ms=300)
    started = time.monotonic()
    assert cat.render("slow") == "a  b"
    assert time.monotonic() - started < 10
    assert codes(cat) == ["prompt_command_failed"]


def test_the_document_time_budget_skips_the_rest(trees: Trees) -> None:
    template(trees, "many", "!`sleep 0.4` !`echo second` !`echo third`")
    cat = catalog(trees, document_timeout_ms=300, command_timeout_ms=5000)
    assert cat.render("many") == "  "
    assert codes(cat) == ["prompt_command_failed", "prompt_command_budget", "prompt_command_budget"]


def test_command_and_document_output_are_bounded(trees: Trees) -> None:
    template(trees, "big", "!`yes x | tr -d '\\n' | head -c 5000`|!`echo more`|!`echo last`")
    cat = catalog(trees, command_output_bytes=100)
    first, second, third = cat.render("big").split("|")
    assert first.startswith("x" * 50) and "[phloem:truncated reason=bytes" in first
    assert len(first.encode()) < 300
    assert (second, third) == ("more", "last")
    # the document's output bytes: once used up, the rest is skipped
    cat = catalog(trees, command_output_bytes=100, document_output_bytes=120)
    first, second, third = cat.render("big").split("|")
    assert first.startswith("x" * 50) and (second, third) == ("", "")
    assert codes(cat) == ["prompt_command_budget", "prompt_command_budget"]


def test_a_failing_command_is_warned(trees: Trees) -> None:
    template(trees, "f", "!`echo out; exit 3`")
    cat = catalog(trees)
    assert cat.render("f") == "out"
    (warning,) = cat.warnings.drain()
    assert warning.code == "prompt_command_failed" and "exit code 3" in warning.message
