"""Argument parsing shared by the feature commands: JSON values and `KEY=VALUE` pairs.

Both raise `UsageError` (exit 2) for a malformed argument, naming the flag.
"""

from __future__ import annotations

import json
from typing import Any

from phloem.cli.commands import UsageError

MAX_PAIR_ARGS = 256
"""How many times one `KEY=VALUE` flag may repeat on one command line."""


def json_arg(flag: str, text: str) -> Any:
    """`text` parsed as JSON, or a usage error naming `--flag`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--{flag} must be JSON: {exc}") from None


def key_values(flag: str, items: list[str]) -> dict[str, Any]:
    """Repeated `--flag KEY=VALUE` as a mapping; VALUE is JSON when it parses, else a string."""
    if len(items) > MAX_PAIR_ARGS:
        raise UsageError(f"--{flag} may be given at most {MAX_PAIR_ARGS} times")
    pairs: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--{flag} must look like KEY=VALUE (got {item!r})")
        try:
            pairs[key] = json.loads(raw)
        except ValueError:
            pairs[key] = raw
    return pairs
