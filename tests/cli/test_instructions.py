"""`phloem instructions show | skills | templates | expand` (in process, no daemon)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from phloem.cli.main import main

pytestmark = pytest.mark.timeout(30)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("user says hi")
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "AGENTS.md").write_text("---\ndisallowed-tools: [Bash]\n---\nroot rules")
    (root / "src" / "AGENTS.md").write_text("src rules")
    (root / "skills" / "tidy").mkdir(parents=True)
    (root / "skills" / "tidy" / "SKILL.md").write_text("---\ndescription: Tidy up\n---\nbody")
    (root / "prompts").mkdir()
    (root / "prompts" / "hello.md").write_text("---\ndescription: Greet\n---\nHello {{1}}!")
    (tmp_path / "phloem.toml").write_text(
        f'[instructions]\nskill_roots = ["{root}/skills"]\ntemplate_roots = ["{root}/prompts"]\n'
    )
    return root


def test_show_lists_documents_in_order_with_touches_and_policy(ws: Path) -> None:
    code, out, _ = cli("instructions", "show", "--workdir", str(ws), "--touch", "src/a.py")
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[-1] for line in lines[:3]] == [
        "~/.claude/CLAUDE.md",
        "AGENTS.md",
        "src/AGENTS.md",
    ]
    assert lines[3] == 'tool policy: {"allow": null, "deny": ["bash"]}'
    code, out, _ = cli("instructions", "show", "--workdir", str(ws), "--text")
    assert out.startswith("Instructions from ~/.claude/CLAUDE.md (user):\n\nuser says hi\n")
    code, out, _ = cli("instructions", "show", "--workdir", str(ws), "--json")
    assert json.loads(out)["documents"][1] == {"path": "AGENTS.md", "scope": "root", "bytes": 10}


def test_skills_templates_and_expand_use_the_config(ws: Path) -> None:
    config = str(ws.parent / "phloem.toml")
    code, out, _ = cli("instructions", "skills", "--workdir", str(ws), "--config", config)
    assert code == 0 and out.split() == ["config:tidy", "Tidy", "up"]
    code, out, _ = cli("instructions", "templates", "--workdir", str(ws), "--config", config)
    assert out.split() == ["/hello", "config", "Greet"]
    code, out, _ = cli(
        "instructions", "expand", "/hello Ann", "--workdir", str(ws), "--config", config
    )
    assert (code, out) == (0, "Hello Ann!\n")
    code, _, err = cli("instructions", "expand", "/nope", "--workdir", str(ws))
    assert code == 1 and "[unknown_template]" in err


def test_a_missing_workdir_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli("instructions", "show", "--workdir", str(tmp_path / "nope"))
    assert code == 2 and "workdir is not a directory" in err


def _ask(
    args: dict[str, object], *, yes: bool, secrets: list[str] | None = None
) -> tuple[bool, str]:
    import argparse

    from phloem.cli.commands import CommandContext
    from phloem.cli.instructions import confirm_prompt
    from phloem.protocols.runs import ConfirmRequest

    err = io.StringIO()
    ctx = CommandContext(argparse.Namespace(), io.StringIO(), err)
    request = ConfirmRequest("call_1", "write", args, "coder", 5.0, secrets or [])
    return confirm_prompt(ctx, approve_all=yes)(request), err.getvalue()


def test_the_prompt_shows_unprintable_characters_as_escapes_and_names_secrets() -> None:
    text = "ok\u202ekcab \x1b[2K\u200b\u00a0\U000e0001 中文"
    approved, said = _ask({"content": text}, yes=True, secrets=["/content"])
    assert approved
    end = " (secret-looking: /content)? yes (--yes)\n"
    shown = said.removeprefix("run write ").removesuffix(end)
    assert shown.isprintable() and "中文" in shown
    assert json.loads(shown) == {"content": text}  # unambiguous: it decodes to what runs


def test_arguments_longer_than_a_prompt_shows_are_refused_unless_yes() -> None:
    from phloem.cli.instructions import MAX_SHOWN_ARGS_CHARS, shown_args

    def of_size(n: int) -> dict[str, object]:
        args: dict[str, object] = {"content": "x" * (n - len(shown_args({"content": ""})))}
        assert len(shown_args(args)) == n
        return args

    approved, said = _ask(of_size(MAX_SHOWN_ARGS_CHARS), yes=False)
    assert not approved and said.endswith("? no (no terminal to ask; --yes approves)\n")
    assert '"content": "xxx' in said  # shown whole
    approved, said = _ask(of_size(MAX_SHOWN_ARGS_CHARS + 1), yes=False)
    assert not approved and said.endswith("? no (too long to show; --yes approves)\n")
    assert "xxx" not in said and f"{MAX_SHOWN_ARGS_CHARS + 1:,} characters" in said
    approved, said = _ask(of_size(MAX_SHOWN_ARGS_CHARS + 1), yes=True)
    assert approved and said.endswith("? yes (--yes)\n")
