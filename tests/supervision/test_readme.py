"""The README's supervision example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)


def test_the_supervision_example_in_the_readme_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).parents[2] / "README.md").read_text()
    section = text.split("\n## Supervision\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(block, "README.md#supervision", "exec"), {"__name__": "readme_supervision"})
    assert capsys.readouterr().out == "running\n"
