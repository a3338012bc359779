"""Instruction templating: `{key}` and `{key?}` filled from session state.

`{key}` inserts `str(state[key])` and fails with `missing_state_key` when the key is
absent; `{key?}` inserts "" instead. Keys may carry a scope prefix (`{user:name}`).
Braces around anything that is not such a name (JSON examples, code) are left as is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from phloem.protocols.errors import ErrorKind, PhloemError

PLACEHOLDER_RE: Final = re.compile(r"\{((?:app:|user:|temp:)?[A-Za-z_][A-Za-z0-9_]*)(\?)?\}")


def render(template: str, state: Mapping[str, Any]) -> str:
    def fill(match: re.Match[str]) -> str:
        key, optional = match.group(1), match.group(2)
        if key in state:
            value = state[key]
            return "" if value is None else str(value)
        if optional:
            return ""
        raise PhloemError(
            ErrorKind.MISSING_STATE_KEY, f"instruction needs state key {key!r}", {"key": key}
        )

    return PLACEHOLDER_RE.sub(fill, template)
