"""Fixtures for the coding-tool tests: a fresh workspace and a context on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from phloem.tools import OutputBudget, ToolContext, Touch, Workspace


class Touches(list[Touch]):
    def __call__(self, touch: Touch) -> None:
        self.append(touch)


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    """Other tests may leave structlog bound to a closed capture stream (phloem.cli binds
    sys.stderr at configure time); tool warnings log, so run on the defaults, then put the
    previous configuration back."""
    previous = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**previous)


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
