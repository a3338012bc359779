"""What every config section is built from, and the ONE loader of configured code.

- `Section`: the base of every config section (keyword-only, unknown keys rejected). Each
  feature declares its section in its own `settings.py`; `phloem.config` gathers them.
- `ComponentPath` / `Components`: a trusted `module:attribute` path, validated by shape.
- `load_component(path)`: the only place in phloem that imports code named by the
  configuration. Nothing from a request, plan, model response or frame reaches it.
  `configured_modules()` names every module it has loaded (what a cluster worker may
  import: `phloem.cluster`).
- `read_toml(path)`: the one TOML file reader (regular files only, a bounded read, UTF-8,
  a nesting-depth guard, `config_invalid`).
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import tomllib
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from phloem.protocols.depth import MAX_NESTING_DEPTH, NestingTooDeep, check_value_depth
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.files import read_bounded

S = TypeVar("S", bound="Section")

CONFIG_FILE_MAX_BYTES = 1024 * 1024
"""Largest TOML file phloem reads."""

MAX_CAUSE_CHARS = 300
"""Longest cause (`Type: message`, on one line) a component error quotes."""

COMPONENT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*$"
COMPONENT_RE = re.compile(COMPONENT_PATTERN)

ComponentPath = Annotated[
    str,
    msgspec.Meta(pattern=COMPONENT_PATTERN, description="a trusted `module:attribute` path"),
]
Components = dict[str, ComponentPath]


class Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of every config section: keyword-only, unknown keys rejected."""


def section(cls: type[S]) -> S:
    """A field default for a nested section: the section with all its defaults."""
    return msgspec.field(default_factory=cls)


_loaded_lock = threading.Lock()
_loaded_modules: set[str] = set()


def configured_modules() -> frozenset[str]:
    """The modules `load_component` has imported in this process (configured code)."""
    with _loaded_lock:
        return frozenset(_loaded_modules)


class ComponentError(PhloemError):
    """A configured component could not be imported or resolved (`config_invalid`)."""


def load_component(path: str, *, what: str = "component") -> Any:
    """Import the trusted `module:attribute` that the configuration names.

    Raises `ComponentError` (kind `config_invalid`) for a path of the wrong shape or one
    that cannot be imported or resolved, whatever the import raised (a module calling
    `sys.exit()` included). The message is one line naming `what` (when given), the path
    and the cause (`Type: message`, whitespace collapsed, at most `MAX_CAUSE_CHARS`);
    `details` holds `path` and `cause` for callers that name the component their own way.
    """
    if not isinstance(path, str) or not COMPONENT_RE.match(path):
        raise ComponentError(
            ErrorKind.CONFIG_INVALID, f"{what} {path!r} is not a `module:attribute` path"
        )
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (Exception, SystemExit) as exc:
        cause = one_line(f"{type(exc).__name__}: {exc}".rstrip(": "), MAX_CAUSE_CHARS)
        named = f"{what} {path!r}" if what else repr(path)
        raise ComponentError(
            ErrorKind.CONFIG_INVALID,
            f"cannot load {named}: {cause}",
            {"path": path, "cause": cause},
        ) from exc
    with _loaded_lock:
        _loaded_modules.add(module_name)
    return obj


def one_line(text: str, limit: int) -> str:
    """`text` with every run of whitespace (newlines included) as one space, cut to `limit`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def read_toml(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """Read a TOML file: its table and its text (for line numbers in later errors).

    Raises `config_invalid` for a file that cannot be opened, is not a regular file (a
    device, FIFO or directory: its `stat()` size says nothing), holds more than
    `CONFIG_FILE_MAX_BYTES` (at most one byte more is ever read), is not UTF-8 or is not
    TOML.
    """
    p = Path(path)
    data = read_bounded(p, CONFIG_FILE_MAX_BYTES, ErrorKind.CONFIG_INVALID)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"{p}: not UTF-8 text") from exc
    return parse_toml(text, str(p)), text


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """TOML text as a table; `config_invalid` naming `source` when it is not TOML, nests
    more than `MAX_NESTING_DEPTH` levels (arrays, inline tables and dotted keys alike;
    `phloem.protocols.depth`), or holds a value Python refuses (an integer of more than
    4,300 digits)."""
    try:
        table = tomllib.loads(text)
        check_value_depth(table)
    except (RecursionError, NestingTooDeep):
        message = f"{source}: nested too deeply (more than {MAX_NESTING_DEPTH} levels)"
        raise PhloemError(ErrorKind.CONFIG_INVALID, message) from None
    except ValueError as exc:  # TOMLDecodeError, and int() refusing a huge integer
        reason = str(exc) if isinstance(exc, tomllib.TOMLDecodeError) else str(exc).split(";")[0]
        message = f"{source}: {one_line(reason, MAX_CAUSE_CHARS)}"
        raise PhloemError(ErrorKind.CONFIG_INVALID, message) from exc
    except Exception as exc:  # never expected from tomllib; still the file's fault
        message = f"{source}: unreadable TOML ({type(exc).__name__})"
        raise PhloemError(ErrorKind.CONFIG_INVALID, message) from None
    return table
