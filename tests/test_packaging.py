"""Packaging: one version, the license shipped, Linux declared, runtime deps complete."""

from __future__ import annotations

import importlib.metadata
import tomllib

import phloem
from phloem._version import __version__
from tests.helpers import ROOT


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert importlib.metadata.version("phloem") == __version__ == phloem.__version__
    written = [
        p.relative_to(ROOT).as_posix()
        for p in [ROOT / "pyproject.toml", *sorted((ROOT / "phloem").rglob("*.py"))]
        if f'"{__version__}"' in p.read_text(encoding="utf-8")
    ]
    assert written == ["phloem/_version.py"]


def test_the_license_file_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text) > 11_000
    meta = importlib.metadata.metadata("phloem")
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (meta.get_all("License-File") or [])


def test_linux_only_and_the_terminal_dependency_are_declared() -> None:
    meta = importlib.metadata.metadata("phloem")
    assert "Operating System :: POSIX :: Linux" in (meta.get_all("Classifier") or [])
    requires = meta.get_all("Requires-Dist") or []
    assert any(r.startswith("rich") for r in requires)
