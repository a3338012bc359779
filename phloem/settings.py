"""What every config section is built from, and the ONE loader of configured code.

- `Section`: the base of every config section (keyword-only, unknown keys rejected). Each
  feature declares its section in its own `settings.py`; `phloem.config` gathers them.
- `ComponentPath` / `Components`: a trusted `module:attribute` path, validated by shape.
- `load_component(path)`: the only place in phloem that imports code named by the
  configuration. Nothing from a request, plan, model response or frame reaches it.
- `read_toml(path)`: the one TOML file reader (size-limited, UTF-8, `config_invalid`).
"""

from __future__ import annotations

import importlib
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from phloem.protocols.errors import ErrorKind, PhloemError

S = TypeVar("S", bound="Section")

CONFIG_FILE_MAX_BYTES = 1024 * 1024
"""Largest TOML file phloem reads."""

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


class ComponentError(PhloemError):
    """A configured component could not be imported or resolved (`config_invalid`)."""


def load_component(path: str, *, what: str = "component") -> Any:
    """Import the trusted `module:attribute` that the configuration names.

    Raises `ComponentError` (kind `config_invalid`) for a path of the wrong shape or one
    that cannot be imported or resolved; the message names `what` and the path, and the
    error type, never the imported module's own error text.
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
    except Exception as exc:
        raise ComponentError(
            ErrorKind.CONFIG_INVALID, f"cannot load {what} {path!r}: {type(exc).__name__}: {exc}"
        ) from exc
    return obj


def read_toml(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """Read a TOML file: its table and its text (for line numbers in later errors).

    Raises `config_invalid` for a file that cannot be read, is larger than
    `CONFIG_FILE_MAX_BYTES`, is not UTF-8 or is not TOML.
    """
    p = Path(path)
    try:
        if p.stat().st_size > CONFIG_FILE_MAX_BYTES:
            raise PhloemError(
                ErrorKind.CONFIG_INVALID, f"{p}: larger than {CONFIG_FILE_MAX_BYTES} bytes"
            )
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"cannot read {p}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"{p}: not UTF-8 text") from exc
    return parse_toml(text, str(p)), text


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """TOML text as a table; `config_invalid` naming `source` when it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"{source}: {exc}") from exc
