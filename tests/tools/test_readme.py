"""The README's coding-tools example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.timeout(30)
def test_coding_tools_readme_example_runs() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Coding tools\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1
    exec(compile(blocks[0], "README.md#coding-tools", "exec"), {})
