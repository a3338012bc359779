"""docs/instructions.md: its three examples run as one program, as printed, and its TOML
examples are real configuration."""

from __future__ import annotations

import tomllib

import msgspec
import pytest

from phloem.agents.settings import LlmAgentConfig
from tests.helpers import doc_blocks, doc_python_blocks, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/instructions.md"
TITLE = "Instructions, skills and tool policy"


def test_the_examples_run_as_one_program(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = doc_python_blocks(GUIDE, TITLE)
    assert len(blocks) == 3
    run_doc_block("\n".join(blocks), GUIDE)
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "['~/.claude/CLAUDE.md', 'AGENTS.md']",
        "['~/.claude/CLAUDE.md', 'AGENTS.md', 'src/AGENTS.md']",
        "Tests: make test. Use type hints.",
        "['bash']",
        "['write', 'edit'] denied denied",
        "hi",
        "Be careful.",
        "['edit', 'find', 'grep', 'ls', 'read', 'write']",
        "Review a change",
        "Read the diff of HEAD~1 first. {'allow': ['grep', 'read'], 'deny': []}",
        "Fix issue-17 on branch main.",
    ]


def test_the_toml_examples_are_real_configuration() -> None:
    toml = doc_blocks(GUIDE, TITLE, "toml")
    llm = tomllib.loads(toml[0])["agents"]["llm"]["coder"]
    msgspec.convert(llm, LlmAgentConfig)  # every key is a real one
    harness = msgspec.convert(tomllib.loads(toml[1])["agents"]["llm"]["coder"], LlmAgentConfig)
    assert harness.confirmation is True and harness.spec("coder").templates is True
