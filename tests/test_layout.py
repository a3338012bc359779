"""The package's shape holds: imports run one way, no cycles, every export imports.

Layers, lowest first: the formats (`protocols`, and the small top-level modules they may
use: `_version`, `limits`, `settings`, `logs`, `paths`, `telemetry`) ← `supervision` ←
`tools` ← `models` ← `actors` ← `config` ← `client`, `daemon`, `cli`, `tree`, `plugins` ←
`examples`. A module may import its own layer and the ones below it; lazy imports inside
functions count too; `if TYPE_CHECKING:` imports (annotations only) do not.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import phloem

PACKAGE = Path(phloem.__file__).parent

LAYERS: dict[str, int] = {
    "__init__": 0,  # the face imports lazily, and only for TYPE_CHECKING
    "_version": 0,
    "protocols": 0,
    "limits": 0,
    "settings": 0,
    "logs": 0,
    "paths": 0,
    "telemetry": 0,
    "supervision": 1,
    "tools": 2,
    "models": 3,  # one-shot runs call tools through the one tool contract
    "actors": 4,
    "config": 5,
    "client": 6,
    "daemon": 6,
    "cli": 6,
    "tree": 6,
    "plugins": 6,  # the public face of the plugin contract (phloem.plugins)
    "web": 6,  # `phloem web`: a client of the daemon, served by the cli
    "examples": 7,
    "__main__": 7,
}

# Within a layer, these parts may not import each other either: peers stay independent.
PEERS_APART: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
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


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: set(imports_of(name, path, modules)) for name, path in modules.items()}


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def test_every_module_has_a_layer() -> None:
    unplaced = sorted({part(m) for m in all_modules()} - set(LAYERS))
    assert not unplaced, f"add these to LAYERS in tests/test_layout.py: {unplaced}"


def test_imports_run_one_way() -> None:
    upward = []
    for module, targets in import_graph().items():
        for target in targets:
            a, b = part(module), part(target)
            if LAYERS[b] > LAYERS[a] or (a, b) in PEERS_APART:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a lower layer into a higher one:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
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
    assert not cycles, f"import cycles: {cycles}"


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


@pytest.mark.parametrize("name", phloem.__all__)
def test_every_public_name_imports(name: str) -> None:
    assert getattr(phloem, name) is not None


def test_the_export_table_points_at_defining_modules() -> None:
    for name, module in phloem._EXPORTS.items():
        assert hasattr(importlib.import_module(module), name), (name, module)


def test_every_module_logs_through_phloem_logs() -> None:
    """`structlog.get_logger` reads structlog's global configuration, which belongs to the
    host program of an embedded tree: phloem's modules take `phloem.logs.get_logger`."""
    offenders = [
        name
        for name, path in all_modules().items()
        if name != "phloem.logs" and "structlog.get_logger(" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
