"""Fake home and workspace trees for the instructions tests (HOME is monkeypatched)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


class Trees:
    """`home` and `ws` (the workspace) under one temp dir; `write(path, text)` writes a
    file below either (`~/...` for the home) and returns its path."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.home = base / "home"
        self.ws = base / "outer" / "ws"
        self.home.mkdir()
        self.ws.mkdir(parents=True)

    def write(self, rel: str, text: str) -> Path:
        if rel.startswith("~/"):
            path = self.home / rel[2:]
        elif rel.startswith("/"):
            path = Path(rel)
        else:
            path = self.ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path


@pytest.fixture
def trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Trees:
    t = Trees(tmp_path)
    monkeypatch.setenv("HOME", str(t.home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return t


Write = Callable[[str, str], Path]
