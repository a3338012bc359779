"""The generated reference, `docs/reference/`: rendered from the code, never by hand.

- `config.md`: every section and key of `phloem.config.Config`, walked with
  `msgspec.inspect` (type, default, range) with the meaning written beside the field in
  its source (the comment above it, the comment after it, or the string under it).
- `cli.md`: every command, argument and option of the argparse parser of
  `phloem.cli.main.build_parser`.
- `errors.md`: every `ErrorKind`, in its source's groups, with its meaning; then the tool
  failure codes and the exit kinds, the two vocabularies kept apart from it.
- `limits.md`: the named limits, by the rule in `LIMIT_NAME` (see `limit_constants`).

It lives with the tests rather than in `phloem/` because it documents this repository
(its output is `docs/`, which an installed phloem does not have) and, like the benchmarks
that write `docs/performance.md` (`python -m tests.perf`), it is a tool of the checkout.
`python -m tests.docs` (`make docs`) writes the files; `tests/docs/test_reference.py`
renders them again in memory and fails when the committed ones differ.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import inspect
import io
import json
import re
import textwrap
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi

import phloem
from phloem.cli.main import build_parser
from phloem.config import Config
from phloem.protocols.errors import ErrorKind
from phloem.supervision.reasons import ExitKind
from phloem.tools.errors import ERROR_CODES

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_DIR = ROOT / "docs" / "reference"
PACKAGE_DIR = Path(phloem.__file__).resolve().parent
REGENERATE = "make docs"
"""What to run when the committed reference differs from the code."""

LIMIT_NAME = re.compile(r"^(?:(?:MAX|MIN|DEFAULT)_[A-Z0-9_]+|[A-Z][A-Z0-9_]*_(?:LIMIT|RANGE))$")
"""A named limit: a public module constant called `MAX_*`, `MIN_*` or `DEFAULT_*`, or
`*_LIMIT` / `*_RANGE`, whose value is a number or a tuple of numbers (a range)."""

COMMON_OPTIONS = ("socket", "config", "json")
"""The options every subcommand takes (`phloem.cli.commands.add_common`), listed once."""

DASH = "\u2013"
"""Between the two ends of a range."""

_BYTE_UNITS = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def render_all() -> dict[str, str]:
    """Every file of the reference, by name, as its text (rendered once a process: the
    code it reads does not change under a running interpreter)."""
    return dict(_rendered())


@functools.cache
def _rendered() -> tuple[tuple[str, str], ...]:
    return (
        ("cli.md", render_cli()),
        ("config.md", render_config()),
        ("errors.md", render_errors()),
        ("limits.md", render_limits()),
    )


def write_all(directory: Path = REFERENCE_DIR) -> list[Path]:
    """Write the reference into `directory` (removing pages it no longer has)."""
    directory.mkdir(parents=True, exist_ok=True)
    pages = render_all()
    for stale in directory.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()
    written = []
    for name, text in pages.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _header(title: str, source: str) -> str:
    return (
        f"# {title}\n\n"
        f"Generated from {source} by `python -m tests.docs` (`{REGENERATE}`).\n"
        "Do not edit it by hand: change the code and regenerate;\n"
        "`tests/docs/test_reference.py` fails when this page and the code disagree.\n"
    )


# --- comments and docstrings written beside a name in the source ------------------------


def source_docs(source: str, body: Iterable[ast.stmt]) -> dict[str, str]:
    """What the source says about each name assigned by the statements `body` of `source`:
    the comment block right above the assignment (no blank line between), its trailing
    comment, and the string right under it, joined in that order. A comment documents the
    one assignment it touches; a name with none of them has no words here."""
    lines = source.splitlines()
    comments: dict[int, tuple[str, bool]] = {}  # line -> (text, on a line of its own)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            comments[row] = (tok.string.lstrip("#").strip(), not lines[row - 1][:col].strip())
    docs: dict[str, str] = {}
    statements = list(body)
    for index, stmt in enumerate(statements):
        name = _assigned_name(stmt)
        if name is None:
            continue
        end = stmt.end_lineno or stmt.lineno
        above: list[str] = []
        row = stmt.lineno - 1
        while row in comments and comments[row][1]:
            above.insert(0, comments[row][0])
            row -= 1
        trailing = [
            comments[line][0]
            for line in range(stmt.lineno, end + 1)
            if line in comments and not comments[line][1]
        ]
        following = statements[index + 1] if index + 1 < len(statements) else None
        under = (
            [inspect.cleandoc(following.value.value)]
            if isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
            else []
        )
        docs[name] = " ".join([*above, *trailing, *under])
    return docs


def _assigned_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id
    return None


def class_field_docs(cls: type) -> dict[str, str]:
    """`source_docs` of the body of class `cls` and of its bases that phloem declares (a
    field inherited from a base has the words written beside it there; the class that
    declares a name last wins, as it does for the field itself)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("phloem."):
            continue  # msgspec.Struct, object: no fields of ours
        source = textwrap.dedent(inspect.getsource(klass))
        (node,) = ast.parse(source).body
        assert isinstance(node, ast.ClassDef)
        docs.update(source_docs(source, node.body))
    return docs


def module_docs(module: str) -> dict[str, str]:
    """`source_docs` of the top level of `module`."""
    source = Path(inspect.getfile(importlib.import_module(module))).read_text(encoding="utf-8")
    return source_docs(source, ast.parse(source).body)


def one_line(text: str) -> str:
    """`text` on one line, safe in a table cell."""
    return " ".join(text.split()).replace("|", "\\|")


# --- values -------------------------------------------------------------------------------


def human_bytes(value: int) -> str:
    """`4194304 (4 MiB)`: a byte count with its largest exact binary unit."""
    for unit, size in _BYTE_UNITS:
        if value >= size and value % size == 0:
            return f"{value} ({value // size} {unit})"
    return str(value)


def show_value(value: Any, *, is_bytes: bool = False) -> str:
    """A default or a constant as it would be written (TOML-like), in a code span."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and is_bytes:
        return f"`{human_bytes(value)}`" if value >= 1024 else f"`{value}`"
    if isinstance(value, int | float):
        return f"`{value!r}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`".replace("|", "\\|")
    if isinstance(value, tuple) and all(isinstance(v, int | float) or v is None for v in value):
        return f" {DASH} ".join(show_value(v, is_bytes=is_bytes) for v in value)
    return f"`{msgspec.json.encode(value).decode()}`".replace("|", "\\|")


# --- config.md ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigTable:
    """A table of the config file: its TOML path and its struct."""

    path: str
    info: mi.StructType


def _unwrap(info: mi.Type) -> tuple[mi.Type, str]:
    """The type under any `Metadata`, and the description that metadata carries."""
    description = ""
    while isinstance(info, mi.Metadata):
        schema = info.extra_json_schema or {}
        description = description or str(schema.get("description", ""))
        info = info.type
    return info, description


def _struct_of(info: mi.Type) -> mi.StructType | None:
    info, _ = _unwrap(info)
    return info if isinstance(info, mi.StructType) else None


def section_anchor(path: str) -> str:
    """The heading fragment of section `path` (as GitHub makes it from `## path`)."""
    return re.sub(r"[^\w\- ]", "", path.lower()).replace(" ", "-")


def _sections(info: mi.StructType, path: str) -> Iterator[ConfigTable]:
    yield ConfigTable(path, info)
    for field in info.fields:
        key = f"{path}.{field.encode_name}" if path else field.encode_name
        inner, _ = _unwrap(field.type)
        if (struct := _struct_of(inner)) is not None:
            yield from _sections(struct, key)
        elif isinstance(inner, mi.DictType) and (struct := _struct_of(inner.value_type)):
            yield from _sections(struct, f"{key}.NAME")


def show_type(info: mi.Type, path: str) -> str:
    """A config value's type in words; a section's type links to its own table."""
    info, description = _unwrap(info)
    if isinstance(info, mi.StructType):
        return f"[section](#{section_anchor(path)})"
    if isinstance(info, mi.UnionType):
        members = [t for t in info.types if not isinstance(t, mi.NoneType)]
        shown = " or ".join(show_type(t, path) for t in members)
        return f"{shown}, optional" if len(members) < len(info.types) else shown
    if isinstance(info, mi.LiteralType):
        return " \\| ".join(show_value(v) for v in info.values)
    if isinstance(info, mi.ListType):
        return f"list of {show_type(info.item_type, path)}"
    if isinstance(info, mi.DictType):
        value = _struct_of(info.value_type)
        target = f"[tables](#{section_anchor(path + '.NAME')})" if value else None
        return f"table of NAME → {target or show_type(info.value_type, path)}"
    simple = {
        mi.IntType: "int",
        mi.FloatType: "float",
        mi.BoolType: "bool",
        mi.StrType: "string",
        mi.AnyType: "any value",
        mi.NoneType: "none",
    }
    word = simple.get(type(info), type(info).__name__)
    return f"{word} ({description})" if description else word


def show_range(info: mi.Type, *, is_bytes: bool = False) -> str:
    """The values a config value may take, beyond its type."""
    info, description = _unwrap(info)
    parts: list[str] = []
    if isinstance(info, mi.IntType | mi.FloatType):
        low = info.ge if info.ge is not None else info.gt
        high = info.le if info.le is not None else info.lt
        if isinstance(info, mi.FloatType):
            # typing caches `Annotated[float, Meta(le=600)]` and `...Meta(le=600.0)` as one
            # type (the metas compare equal), so which module spelled it first would decide
            # how the bound is shown: a float's bounds are shown as floats.
            low = None if low is None else float(low)
            high = None if high is None else float(high)
        if info.ge is not None and info.le is not None:
            parts.append(
                f"{show_value(low, is_bytes=is_bytes)} {DASH} {show_value(high, is_bytes=is_bytes)}"
            )
        else:
            if low is not None:
                parts.append(
                    f"{'≥' if info.ge is not None else '>'} {show_value(low, is_bytes=is_bytes)}"
                )
            if high is not None:
                parts.append(
                    f"{'≤' if info.le is not None else '<'} {show_value(high, is_bytes=is_bytes)}"
                )
    elif isinstance(info, mi.StrType | mi.ListType):
        if info.min_length is not None or info.max_length is not None:
            low_len = info.min_length or 0
            high_len = "" if info.max_length is None else str(info.max_length)
            parts.append(f"length {low_len} {DASH} {high_len}".rstrip(f" {DASH}"))
        if isinstance(info, mi.StrType) and info.pattern and not description:
            parts.append(f"matches `{info.pattern}`".replace("|", "\\|"))
        if isinstance(info, mi.ListType) and (item := show_range(info.item_type)):
            parts.append(f"each {item}")
    elif isinstance(info, mi.DictType):
        key, _ = _unwrap(info.key_type)
        if isinstance(key, mi.LiteralType):
            parts.append("names " + " \\| ".join(show_value(v) for v in key.values))
        elif isinstance(key, mi.StrType) and key.pattern:
            parts.append(f"names match `{key.pattern}`".replace("|", "\\|"))
        if not _struct_of(info.value_type) and (item := show_range(info.value_type)):
            parts.append(f"each {item}")
    elif isinstance(info, mi.UnionType):
        parts += [r for t in info.types if (r := show_range(t, is_bytes=is_bytes))]
    return ", ".join(parts)


def show_default(field: mi.Field) -> str:
    if field.required:
        return "required"
    has_default = field.default is not msgspec.NODEFAULT
    value = field.default if has_default else field.default_factory()
    if isinstance(value, msgspec.Struct):
        return "its defaults"
    return show_value(value, is_bytes=field.encode_name.endswith("bytes"))


def render_section(section: ConfigTable) -> str:
    cls = section.info.cls
    docs = class_field_docs(cls)
    heading = section.path or "top level"
    doc = cls.__dict__.get("__doc__")
    lines = [f"## {heading}", ""]
    if doc:
        lines += [inspect.cleandoc(doc), ""]
    lines += [
        f"`{cls.__module__}.{cls.__qualname__}`",
        "",
        "| key | type | default | range | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for field in section.info.fields:
        key = f"{section.path}.{field.encode_name}" if section.path else field.encode_name
        is_bytes = field.encode_name.endswith("bytes")
        meaning = docs.get(field.name, "")
        lines.append(
            f"| `{field.encode_name}` | {show_type(field.type, key)} | {show_default(field)} "
            f"| {show_range(field.type, is_bytes=is_bytes)} "
            f"| {one_line(meaning)} |"
        )
    return "\n".join(lines) + "\n"


def render_config() -> str:
    root = mi.type_info(Config)
    assert isinstance(root, mi.StructType)
    sections = list(_sections(root, ""))
    index = "\n".join(f"- [{s.path}](#{section_anchor(s.path)})" for s in sections[1:])
    parts = [
        _header("Configuration reference", "`phloem.config.Config`"),
        "Every key is optional unless its default says `required`. A table written `NAME`\n"
        "(`[providers.NAME]`, `[agents.llm.NAME]`) is one of many, by the name you give it.\n"
        "Sizes are in bytes, durations in the unit their name ends with (`_s`, `_ms`).\n"
        "[Configuration](../configuration.md) explains how the file is found and checked;\n"
        "each feature's guide explains its keys in context.\n",
        f"Sections:\n\n{index}\n",
    ]
    parts += [render_section(s) for s in sections]
    return "\n".join(parts)


# --- cli.md -------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += list(action.choices.items())
    return found


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        if action.nargs == "?":
            return f"`[{name}]`"
        if action.nargs == "*":
            return f"`[{name} ...]`"
        if action.nargs == "+":
            return f"`{name} [{name} ...]`"
        return f"`{name}`"
    takes_value = action.nargs != 0
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if action.choices is not None and action.metavar is None:
        metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
    shown = ", ".join(action.option_strings)
    return f"`{shown} {metavar}`" if takes_value else f"`{shown}`"


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:
        text = text % {**vars(action), "prog": prog}
    notes = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    default = action.default
    if (
        action.option_strings
        and action.nargs != 0
        and default not in (None, argparse.SUPPRESS, [], "")
        and f"{default}" not in text
    ):
        notes.append(f"default `{default}`")
    return one_line("; ".join([text, *notes]) if notes and text else text or "; ".join(notes))


def _render_command(name: str, parser: argparse.ArgumentParser, top: bool) -> Iterator[str]:
    subcommands = _subcommands(parser)
    rows = [
        f"| {_argument(a)} | {_help(a, name)} |"
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        and (top or a.dest not in COMMON_OPTIONS)
    ]
    lines = [f"## {name}", ""]
    if parser.description:
        lines += [one_line(parser.description), ""]
    if subcommands:
        lines += ["| command | what it does |", "| --- | --- |"]
        for sub_name, sub in subcommands:
            anchor = section_anchor(f"{name} {sub_name}")
            lines.append(f"| [`{sub_name}`](#{anchor}) | {one_line(sub.description or '')} |")
        lines.append("")
    if rows:
        lines += ["| argument | meaning |", "| --- | --- |", *rows, ""]
    yield "\n".join(lines)
    for sub_name, sub in subcommands:
        yield from _render_command(f"{name} {sub_name}", sub, False)


def render_cli() -> str:
    parser = build_parser()
    intro = (
        "Every command also takes `--socket PATH`, `--config FILE` and `--json`, before or\n"
        "after its name (`phloem --json status`), and `-h` / `--help`. Exit codes: 0 success,\n"
        "1 an error (one line on stderr; with `--json` the error value on stdout too), 2 a\n"
        "usage error, 130 interrupted (Ctrl-C).\n"
    )
    sections = list(_render_command("phloem", parser, True))
    return "\n".join(
        [_header("Command-line reference", "the parser of `phloem.cli.main`"), intro, *sections]
    )


# --- errors.md ----------------------------------------------------------------------------


def error_groups() -> list[tuple[str, list[ErrorKind]]]:
    """`ErrorKind`'s members under the `# --- group ---` comments of its source."""
    source = textwrap.dedent(inspect.getsource(ErrorKind))
    heading_of_line: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and (m := re.match(r"#\s*-+\s*(.*?)\s*-*$", tok.string)):
            heading_of_line[tok.start[0]] = m.group(1)
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.ClassDef)
    groups: list[tuple[str, list[ErrorKind]]] = []
    for stmt in node.body:
        if (name := _assigned_name(stmt)) is None or not hasattr(ErrorKind, name):
            continue
        member = getattr(ErrorKind, name)
        if not isinstance(member, ErrorKind):
            continue
        heading = max(
            ((line, text) for line, text in heading_of_line.items() if line < stmt.lineno),
            default=(0, "other"),
        )[1]
        if not groups or groups[-1][0] != heading:
            groups.append((heading, []))
        groups[-1][1].append(member)
    assert sum(len(m) for _, m in groups) == len(ErrorKind), "a member outside the class body"
    return groups


def render_errors() -> str:
    parts = [
        _header("Error kinds", "`phloem.protocols.errors.ErrorKind`"),
        "Every failure at a public boundary (the socket, the clients, CLI `--json`, result\n"
        "documents, agent events and outcomes, model errors, one-shot results) is a value\n"
        "`{kind, message, details?}` whose `kind` is one of these. A kind is a plain string on\n"
        'the wire; in Python, `ErrorKind.TIMEOUT == "timeout"`.\n',
    ]
    for heading, members in error_groups():
        rows = [f"| `{m.value}` | {one_line(m.meaning)} |" for m in members]
        parts.append(
            "\n".join(
                [f"## {heading.capitalize()}", "", "| kind | meaning |", "| --- | --- |", *rows, ""]
            )
        )
    codes_doc = module_docs("phloem.tools.errors")["ERROR_CODES"]
    parts.append(
        "## Tool failure codes\n\n"
        "Not error kinds: the `error` of a tool's failure value\n"
        '`{"error": code, "message": ...}` (`phloem.tools.errors.ERROR_CODES`), spelled as the\n'
        "plasmid tool conformance pack pins "
        f"them. {one_line(codes_doc)}\n\n" + ", ".join(f"`{c}`" for c in sorted(ERROR_CODES)) + "\n"
    )
    parts.append(
        "## Exit kinds\n\n"
        "Why an actor or a process child stopped (`phloem.supervision.reasons.ExitKind`). When an\n"
        "exit ends a stream receiver, its non-normal exit kind is also its error kind.\n\n"
        + ", ".join(f"`{k.value}`" for k in ExitKind)
        + "\n"
    )
    return "\n".join(parts)


# --- limits.md ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    module: str
    name: str
    value: Any
    meaning: str


def _is_limit_value(value: Any) -> bool:
    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    if isinstance(value, tuple):
        return bool(value) and all(number(v) or v is None for v in value)
    return number(value)


def limit_constants() -> list[Limit]:
    """Every named limit of `phloem/`: a module-level assignment to a name `LIMIT_NAME`
    matches whose value, once the module is imported, is a number or a tuple of numbers
    (ranges may leave a side open with None). Strings named `DEFAULT_*` (a model, a URL)
    are defaults but not limits, so they are left out; so are private `_NAMES`."""
    found: list[Limit] = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        names = [n for stmt in tree.body if (n := _assigned_name(stmt)) and LIMIT_NAME.match(n)]
        if not names:
            continue
        parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        module_name = ".".join(parts)
        module = importlib.import_module(module_name)
        docs = source_docs(source, tree.body)
        for name in names:
            value = getattr(module, name)
            if _is_limit_value(value):
                found.append(Limit(module_name, name, value, docs[name]))
    return found


def render_limits() -> str:
    limits = limit_constants()
    units: dict[str, list[Limit]] = {}
    for limit in limits:
        parts = limit.module.split(".")
        unit = ".".join(parts[:3] if parts[1] == "actors" and len(parts) > 3 else parts[:2])
        units.setdefault(unit, []).append(limit)
    parts = [
        _header("Limits", "the module constants of `phloem/`"),
        "The named limits in the code: every public module-level constant called `MAX_*`,\n"
        "`MIN_*` or `DEFAULT_*`, or `*_LIMIT` or `*_RANGE`, whose value is a number or a\n"
        "tuple of numbers (a range: its low and high ends, inclusive unless its meaning says\n"
        "otherwise).\n"
        "String defaults (a model name, a URL) are not limits and are left out. Limits you can\n"
        "configure are keys in [the configuration reference](config.md), which gives each\n"
        "key's range; the constants here are their defaults and bounds, and the fixed limits.\n"
        f"{len(limits)} constants in {len({limit.module for limit in limits})} modules.\n",
    ]
    for unit, members in sorted(units.items()):
        rows = [
            f"| `{m.name}` | {show_value(m.value, is_bytes='BYTES' in m.name)} "
            f"| `{m.module}` | {one_line(m.meaning)} |"
            for m in members
        ]
        parts.append(
            "\n".join(
                [
                    f"## {unit}",
                    "",
                    "| constant | value | module | meaning |",
                    "| --- | --- | --- | --- |",
                    *rows,
                    "",
                ]
            )
        )
    return "\n".join(parts)


# --- comparing with the committed pages ----------------------------------------------------


def stale_pages(directory: Path = REFERENCE_DIR) -> list[tuple[Path, str]]:
    """Each page of `directory` that differs from what the code renders now, with the first
    difference: a missing page, an extra one, or the first line that differs."""
    pages = render_all()
    stale: list[tuple[Path, str]] = []
    for name, text in pages.items():
        path = directory / name
        if not path.is_file():
            stale.append((path, "missing"))
            continue
        committed = path.read_text(encoding="utf-8").splitlines()
        rendered = text.splitlines()
        for number, (old, new) in enumerate(zip(committed, rendered, strict=False), 1):
            if old != new:
                stale.append((path, f"line {number} is {old!r}, the code gives {new!r}"))
                break
        else:
            if len(committed) != len(rendered):
                stale.append((path, f"{len(committed)} lines, the code gives {len(rendered)}"))
    stale += [(p, "not generated") for p in sorted(directory.glob("*.md")) if p.name not in pages]
    return stale
