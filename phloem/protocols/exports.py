"""Lazy package faces (PEP 562): a face names its exports in a table, not in imports.

    _EXPORTS = {"Agent": "phloem.agents.agent", ...}
    if TYPE_CHECKING:
        from phloem.agents.agent import Agent as Agent      # for type checkers
    else:
        __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

Importing one submodule of a package then loads its face and that submodule only, not
the siblings the face re-exports: `import phloem.client` and the CLI stay cheap however
much the engine behind a face weighs. A name is imported from its module on first use and
kept in the package's namespace, so later uses are plain attribute reads.

It lives with the formats because every layer's faces use it and it imports nothing of
phloem.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for the face of `package`: the name `n` comes from
    module `exports[n]`, imported on first use; any other name is an `AttributeError`."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return getattr_, dir_
