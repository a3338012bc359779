"""Every third-party module phloem imports is declared in pyproject.toml, and the README
says why each runtime dependency is there.

The imports are read from the source (ast: `import x`, `from x import y`, and the one
`importlib.import_module("ray")`), mapped to their distributions by the installed
metadata (`importlib.metadata.packages_distributions()`), and looked up in
`[project] dependencies` (or, for `ray`, its optional extra).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "phloem"
# Modules imported only through an optional extra: module -> extra.
OPTIONAL_MODULES = {"ray": "ray"}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return _normalized(match.group(0))


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_requirement_name(r) for r in project["dependencies"]}
    extras = {
        extra: {_requirement_name(r) for r in reqs}
        for extra, reqs in project["optional-dependencies"].items()
    }
    return runtime, extras


def _imported_modules(root: Path) -> dict[str, str]:
    """Top-level modules imported by the code under `root`, each with one file using it."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names = [node.args[0].value]
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(root)))
    return found


def _third_party(modules: dict[str, str]) -> dict[str, str]:
    return {
        m: where
        for m, where in modules.items()
        if m not in sys.stdlib_module_names and m not in {"phloem", "__future__"}
    }


def test_the_scan_sees_direct_imports_including_the_ones_found_undeclared() -> None:
    modules = _third_party(_imported_modules(PACKAGE))
    for name in ("requests", "httpcore", "anyio", "msgspec", "ray"):
        assert name in modules, name


def test_a_module_without_a_declared_distribution_is_reported(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import msgspec\nimport hypothesis\n")
    (tmp_path / "n.py").write_text("import no_such_module_anywhere\n")
    assert _undeclared(_third_party(_imported_modules(tmp_path))) == [
        "hypothesis (m.py): distribution hypothesis is not in [project] dependencies",
        "no_such_module_anywhere (n.py): no installed distribution provides it",
    ]


def _undeclared(modules: dict[str, str]) -> list[str]:
    runtime, extras = _declared()
    distributions = importlib.metadata.packages_distributions()
    problems: list[str] = []
    for module, where in sorted(modules.items()):
        dists = {_normalized(d) for d in distributions.get(module, [])}
        if not dists:
            problems.append(f"{module} ({where}): no installed distribution provides it")
            continue
        extra = OPTIONAL_MODULES.get(module)
        allowed = extras.get(extra, set()) if extra else runtime
        if not dists & allowed:
            where_declared = f"the [{extra}] extra" if extra else "[project] dependencies"
            problems.append(
                f"{module} ({where}): distribution {', '.join(sorted(dists))} is not in "
                f"{where_declared}"
            )
    return problems


def test_every_third_party_import_is_a_declared_dependency() -> None:
    modules = _third_party(_imported_modules(PACKAGE))
    assert _undeclared(modules) == []


def test_the_readme_says_why_each_runtime_dependency_is_there() -> None:
    runtime, _ = _declared()
    readme = ROOT / "README.md"
    rows = {
        _normalized(m.group(1))
        for m in re.finditer(r"^\| `([A-Za-z0-9._-]+)` \| \S.*\|$", readme.read_text(), re.M)
    }
    assert rows == runtime
