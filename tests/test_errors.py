"""The one error vocabulary: every kind phloem raises is declared in `ErrorKind`.

`test_every_literal_kind_is_declared` walks the source of `phloem/` with `ast` and fails
on any literal kind (in `PhloemError("...")` and its subclasses, `ErrorValue(kind=...)`,
`ResultError`, agent `error_event`s, the daemon's `_fail`/`refuse`, `RefKind` error
fields and `err.kind == "..."` tests) that `phloem.protocols.errors.ErrorKind` does not
declare. Tool failure codes are their own vocabulary (`phloem.tools.errors.ERROR_CODES`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.agents.executor import exit_error_kind
from phloem.agents.outcome import OK_STATUSES, OutcomeStatus
from phloem.models.oneshot import ONE_SHOT_KINDS
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.model import MODEL_ERROR_KINDS, ModelError
from phloem.supervision.reasons import ExitKind
from phloem.tools.errors import ERROR_CODES

PACKAGE = Path(__file__).resolve().parents[1] / "phloem"
CONFORMANCE = Path("/work/shared/conformance/plasmid-v1")
KINDS = frozenset(k.value for k in ErrorKind)

# Callee name -> the positional index of its kind argument (`kind=` is always checked).
KIND_ARG = {
    "ErrorValue": 0,
    "ResultError": 0,
    "_error": 0,  # tree.py
    "_fail": 0,  # daemon/connection.py
    "_Stop": 0,  # models/oneshot.py
    "error_frame": 0,  # protocols/wire.py
    "refuse": 1,  # daemon/handshake.py (Handshakes.refuse)
}
KIND_ARG_METHODS = {"error_event": 1}
ERROR_NAMES = frozenset({"err", "exc", "error", "e"})  # `err.kind == "..."` tests


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def error_classes(trees: dict[Path, ast.Module] | list[ast.Module]) -> dict[str, bool]:
    """`PhloemError` and every class in the trees that derives from it (by name), each
    with whether its constructor takes the kind first (its own or an inherited `__init__`
    whose first parameter is `kind`; `ChannelClosed(message)` does not)."""
    classes = [
        node
        for tree in (trees.values() if isinstance(trees, dict) else trees)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]
    takes_kind = {"PhloemError": True}
    grew = True
    while grew:
        grew = False
        for cls in classes:
            parent = next((_name(b) for b in cls.bases if _name(b) in takes_kind), None)
            if cls.name in takes_kind or parent is None:
                continue
            init = next(
                (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None,
            )
            if init is None:
                takes_kind[cls.name] = takes_kind[parent]
            else:
                params = init.args.posonlyargs + init.args.args
                takes_kind[cls.name] = len(params) > 1 and params[1].arg == "kind"
            grew = True
    return takes_kind


def _argument(call: ast.Call, index: int) -> Iterator[ast.expr]:
    for kw in call.keywords:
        if kw.arg == "kind":
            yield kw.value
    if len(call.args) > index:
        yield call.args[index]


def kind_literals(tree: ast.Module, errors: dict[str, bool]) -> Iterator[tuple[int, str]]:
    """(line, literal) of every string constant in a kind position of `tree`."""

    def visit(node: ast.AST, in_error_class: bool, in_ref_kind: bool) -> Iterator[ast.expr]:
        if isinstance(node, ast.ClassDef):
            in_error_class = node.name in errors
            in_ref_kind = node.name == "RefKind"
        elif isinstance(node, ast.Call):
            name = _name(node.func)
            if name is not None and errors.get(name):
                yield from _argument(node, 0)
            elif name in KIND_ARG:
                yield from _argument(node, KIND_ARG[name])
            if isinstance(node.func, ast.Attribute) and name in KIND_ARG_METHODS:
                yield from _argument(node, KIND_ARG_METHODS[name])
            if (
                in_error_class
                and name == "__init__"
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Call)
                and _name(node.func.value.func) == "super"
            ):
                yield from _argument(node, 0)
            if name == "RefKind":
                yield from (kw.value for kw in node.keywords if (kw.arg or "").endswith("_error"))
                yield from node.args[2:]
        elif isinstance(node, ast.AnnAssign) and in_ref_kind:
            target = node.target
            if isinstance(target, ast.Name) and target.id.endswith("_error") and node.value:
                yield node.value
        elif isinstance(node, ast.Compare):
            left = node.left
            if (
                isinstance(left, ast.Attribute)
                and left.attr == "kind"
                and isinstance(left.value, ast.Name)
                and left.value.id in ERROR_NAMES
            ):
                for right in node.comparators:
                    if isinstance(right, ast.Tuple | ast.Set | ast.List):
                        yield from right.elts
                    else:
                        yield right
        for child in ast.iter_child_nodes(node):
            yield from visit(child, in_error_class, in_ref_kind)

    for expr in visit(tree, False, False):
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            yield expr.lineno, expr.value


def _all_literals() -> list[tuple[str, int, str]]:
    trees = _sources()
    errors = error_classes(trees)
    return [
        (str(path.relative_to(PACKAGE.parent)), line, value)
        for path, tree in trees.items()
        for line, value in kind_literals(tree, errors)
    ]


def test_every_literal_kind_is_declared() -> None:
    literals = _all_literals()
    assert len(literals) >= 20, "the walker found too few kind sites; is it still working?"
    undeclared = [
        f"{path}:{line}: {value!r}" for path, line, value in literals if value not in KINDS
    ]
    assert not undeclared, "kinds missing from phloem.protocols.errors.ErrorKind:\n" + "\n".join(
        undeclared
    )


def test_the_walker_sees_every_kind_position() -> None:
    source = """
class MyError(PhloemError):
    def __init__(self, kind, message):
        super().__init__(kind, message)
class Sub(MyError): pass
class Closed(MyError):
    def __init__(self, message):
        super().__init__("k1", message)
Closed("a message, not a kind")
class RefKind:
    invalid_error: str = "k2"
PhloemError("k3", "m")
Sub("k4", "m")
ErrorValue(kind="k5", message="m")
self.error_event(ctx, "k6", "m")
self._fail("k7", "m")
_error("k14", "m")
error_frame("k15", "m")
refuse(sock, "k8", "m")
RefKind("n", prefix="p_", not_owner_error="k9")
if err.kind == "k10" or exc.kind in ("k11", "k12"): pass
ResultError("k13")
event.kind == "not_an_error_kind"
ValueError("not a kind")
"""
    tree = ast.parse(source)
    found = {value for _, value in kind_literals(tree, error_classes([tree]))}
    assert found == {f"k{i}" for i in range(1, 16)}


def test_every_kind_is_snake_case_named_alike_and_has_a_meaning() -> None:
    for kind in ErrorKind:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", kind.value), kind
        assert kind.name == kind.value.upper(), kind
        assert kind.meaning and "\n" not in kind.meaning, kind
    assert len(KINDS) == len(ErrorKind)


def test_a_kind_is_a_plain_string_on_the_wire() -> None:
    value = ErrorValue(kind=ErrorKind.CONFIG_INVALID, message="m")
    assert value.kind == "config_invalid"
    assert msgspec_roundtrip(value) == {"type": "error", "kind": "config_invalid", "message": "m"}
    err = PhloemError(ErrorKind.NOT_OWNER, "x")
    assert str(err) == "not_owner: x"
    assert err.kind == "not_owner"


def msgspec_roundtrip(value: ErrorValue) -> object:
    import msgspec

    data: object = json.loads(msgspec.json.encode(value))
    assert isinstance(data, dict)
    data.pop("details", None)
    return data


def test_one_spelling_for_cancelled_and_config_invalid() -> None:
    assert "canceled" not in KINDS and "invalid_config" not in KINDS
    assert ErrorKind.CANCELLED in ONE_SHOT_KINDS
    assert ErrorKind.CONFIG_INVALID in MODEL_ERROR_KINDS


def test_failed_agent_outcomes_are_kinds() -> None:
    for status in OutcomeStatus:
        if status not in OK_STATUSES:
            assert status.value in KINDS, status


def test_exit_kinds_that_become_error_kinds_are_declared() -> None:
    # a stream receiver detached by an exit raises the exit kind (supervision/credit.py)
    for exit_kind in ExitKind:
        if exit_kind is not ExitKind.NORMAL:
            assert exit_kind.value in KINDS, exit_kind
        if exit_kind not in (ExitKind.NORMAL, ExitKind.EXCEPTION):
            assert exit_error_kind(exit_kind) == f"agent_{exit_kind.value}"
    with pytest.raises(ValueError):
        exit_error_kind(ExitKind.EXCEPTION)


def test_model_error_takes_model_kinds_of_the_one_vocabulary() -> None:
    assert ModelError("config_invalid", "m").kind == ErrorKind.CONFIG_INVALID
    assert ModelError(ErrorKind.TIMEOUT, "m").retryable
    with pytest.raises(ValueError):
        ModelError("invalid_config", "m")
    with pytest.raises(ValueError):
        ModelError(ErrorKind.NOT_OWNER, "m")


def test_tool_failure_codes_are_their_own_declared_vocabulary() -> None:
    codes = []
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) == "ToolFailure":
                for expr in _argument(node, 0):
                    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                        codes.append((path.name, expr.lineno, expr.value))
    assert len(codes) >= 10
    assert [c for c in codes if c[2] not in ERROR_CODES] == []


@pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="no conformance pack")
def test_the_conformance_pack_pins_tool_codes_from_error_codes() -> None:
    pinned = set()
    for expected in (CONFORMANCE / "tools").rglob("expected.json"):
        code = json.loads(expected.read_text()).get("error")
        if isinstance(code, str) and re.fullmatch(r"[a-z_]+", code):
            pinned.add(code)
    assert pinned and pinned <= ERROR_CODES


def test_one_shot_runs_stop_only_with_one_shot_kinds() -> None:
    tree = ast.parse((PACKAGE / "models" / "oneshot.py").read_text())
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in ("_Stop", "PhloemError"):
            for expr in ast.walk(node.args[0]):
                if isinstance(expr, ast.Attribute) and _name(expr.value) == "ErrorKind":
                    used.add(ErrorKind[expr.attr])
    assert ErrorKind.CANCELLED in used
    assert used <= ONE_SHOT_KINDS
