"""The package's shape holds: imports run one way, no cycles, features meet only through
their protocols, every export imports.

Units: each folder directly under `phloem/`, each feature folder under `phloem/actors/`, and
each top-level module. Layers, lowest first (docs/design.md): `protocols` ← `base` ←
`supervision` ← `cluster` ← `tools`, `models` ← `agents`, `instructions` ← `actors` (the
services) ← `config` ← `client`, `daemon`, `cli`, `web`, `api`, `tree`, the faces ←
`examples`.
A unit may import its own layer and the ones below it; units of one layer may import each
other so long as no cycle forms. Lazy imports inside functions count; `if TYPE_CHECKING:`
imports (annotations only) do not. Feature folders under `actors/` import each other only
through their `protocol.py` (and the shared service machinery: services, streams, runs,
reload).
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import phloem

PACKAGE = Path(phloem.__file__).parent

LAYERS: dict[str, float] = {
    "(face)": 8,  # phloem/__init__.py: lazy exports
    "_version": 0,
    "protocols": 0,
    "base": 1,
    "supervision": 2,
    "cluster": 3,
    "tools": 4,
    "models": 4,
    "agents": 5,
    "instructions": 5,
    "actors": 6,
    "config": 7,
    "client": 8,
    "daemon": 8,
    "cli": 8,
    "web": 8,
    "tree": 8,
    "plugins": 8,  # the public face of the plugin contract (phloem.plugins)
    "examples": 9,
    "__main__": 9,
}
SHARED_SERVICE_MACHINERY = (
    "phloem.actors.services",
    "phloem.actors.streams",
    "phloem.actors.runs",
    "phloem.actors.reload",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def all_modules() -> dict[str, Path]:
    """Every module of the package (read once per test session; callers do not change it)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The phloem modules `name` imports at run time (lazy ones included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    is_package = path.name == "__init__.py"

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            targets = targets or [base]
        for target in targets:
            if target.startswith("phloem"):
                found = resolve(target)
                if found and found != name:
                    yield found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """What each module imports (parsed once per test session; callers do not change it)."""
    modules = all_modules()
    return {name: set(imports_of(name, path, modules)) for name, path in modules.items()}


def unit(module: str) -> str:
    """The unit a module belongs to: `tools`, `actors/planning`, `config`, `(face)`."""
    pieces = module.split(".")
    if len(pieces) == 1:
        return "(face)"
    if pieces[1] == "actors" and len(pieces) > 2 and (PACKAGE / "actors" / pieces[2]).is_dir():
        if ".".join(pieces[:3]) in SHARED_SERVICE_MACHINERY:  # a package, not a feature
            return "actors"
        return f"actors/{pieces[2]}"
    return pieces[1]


def layer(unit_name: str) -> float:
    return LAYERS[unit_name.split("/", maxsplit=1)[0]]


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        src = unit(module)
        graph.setdefault(src, set())
        graph[src].update(unit(t) for t in targets if unit(t) != src)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of `graph`: its strongly connected sets of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_every_module_has_a_layer() -> None:
    unplaced = sorted({unit(m).split("/")[0] for m in all_modules()} - set(LAYERS))
    assert not unplaced, f"add these to LAYERS in tests/test_layout.py: {unplaced}"


def test_imports_run_one_way() -> None:
    upward = [
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if layer(unit(target)) > layer(unit(module))
    ]
    assert not upward, "imports from a lower layer into a higher one:\n" + "\n".join(upward)


def test_no_import_cycles_between_units() -> None:
    assert strongly_connected(unit_graph()) == []


def test_no_import_cycles_between_modules() -> None:
    assert strongly_connected(import_graph()) == []


def test_feature_folders_meet_only_through_their_protocols() -> None:
    crossings = [
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if unit(module).startswith("actors/")
        and unit(target).startswith("actors/")
        and unit(module) != unit(target)
        and not target.endswith(".protocol")
    ]
    assert crossings == []


def test_the_shared_service_machinery_is_no_feature() -> None:
    for module in SHARED_SERVICE_MACHINERY:
        if module in all_modules():
            assert unit(module) == "actors", module


def test_the_checker_finds_a_cycle_and_a_crossing() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert unit("phloem.actors.planning.run") == "actors/planning"
    assert unit("phloem.actors.services") == "actors"
    assert unit("phloem") == "(face)"
    assert layer("actors/planning") > layer("agents") > layer("tools") > layer("protocols")


def test_the_checker_sees_lazy_imports_and_ignores_type_checking(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from phloem.tree import Tree\n"
        "def f():\n    from phloem.cli.main import main\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    modules = all_modules()
    assert set(imports_of("phloem.protocols.probe", path, modules)) == {"phloem.cli.main"}


@functools.cache
def lazy_faces() -> dict[str, ast.Module]:
    """The package faces that export through a table (`protocols.exports.lazy_exports`;
    parsed once per test session)."""
    faces = {}
    for name, path in all_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(
            isinstance(node, ast.AnnAssign | ast.Assign) and "_EXPORTS" in ast.unparse(node)
            for node in tree.body
        ):
            faces[name] = tree
    return faces


def face_exports() -> list[tuple[str, str]]:
    return [
        (face, name)
        for face in sorted(lazy_faces())
        for name in sorted(importlib.import_module(face)._EXPORTS)
    ]


def test_the_faces_are_lazy() -> None:
    assert {"phloem", "phloem.agents", "phloem.client", "phloem.supervision"} <= set(lazy_faces())


@pytest.mark.parametrize(("face", "name"), face_exports())
def test_every_export_of_a_face_imports_from_its_defining_module(face: str, name: str) -> None:
    module = importlib.import_module(face)
    source = importlib.import_module(module._EXPORTS[name])
    assert getattr(module, name) is getattr(source, name)
    assert name in module.__all__ and name in dir(module)


@pytest.mark.parametrize("face", sorted(lazy_faces()))
def test_a_faces_type_checking_imports_are_its_export_table(face: str) -> None:
    """What type checkers see (`if TYPE_CHECKING:` imports) is what the face exports."""
    declared: dict[str, str] = {}
    for node in ast.walk(lazy_faces()[face]):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for child in node.body:
                if isinstance(child, ast.ImportFrom) and child.module:
                    declared.update({a.asname or a.name: child.module for a in child.names})
    assert declared == importlib.import_module(face)._EXPORTS
    # A name its package also has as a submodule would be shadowed by that module as
    # soon as anything imported it.
    package = all_modules()[face]
    if package.name == "__init__.py":
        assert not {n for n in declared if (package.parent / f"{n}.py").exists()}


def test_an_unknown_name_of_a_face_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = phloem.Nope  # type: ignore[attr-defined]


def test_every_module_logs_through_phloem_logs() -> None:
    """One logging mechanism: phloem's modules take `phloem.base.logs.get_logger`, never a
    standard-library logger of their own (whose records would skip redaction, the actor
    path and the daemon's JSON sink) nor a logging library's."""
    pattern = re.compile(
        r"getLogger\((__name__|[\"']phloem)|^\s*(import|from) (structlog|loguru)\b", re.M
    )
    offenders = [
        name
        for name, path in all_modules().items()
        if name != "phloem.base.logs" and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
