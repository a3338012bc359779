"""Fixtures for the coding-tool tests: a fresh workspace and a context on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from phloem.tools import OutputBudget, ToolContext, Touch, Workspace


class Touches(list[Touch]):
    def __call__(self, touch: Touch) -> None:
        self.append(touch)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def touches() -> Touches:
    return Touches()


@pytest.fixture
def ctx(root: Path, touches: Touches) -> ToolContext:
    return ToolContext(
        workspace=Workspace(root), session="s1", budget=OutputBudget(), on_touch=touches
    )


def seed(root: Path, files: dict[str, str | bytes]) -> None:
    for relative, content in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
