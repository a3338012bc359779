"""Argument parsing shared by the feature commands: JSON values, `KEY=VALUE` pairs and
durations (`30s`, `5m`, `2h`, `1d`).

Both raise `UsageError` (exit 2) for a malformed argument, naming the flag.
"""

from __future__ import annotations

import json
import re
from typing import Any

from phloem.cli.commands import UsageError

MAX_PAIR_ARGS = 256
"""How many times one `KEY=VALUE` flag may repeat on one command line."""
MAX_DURATION_S = 366 * 86_400.0
"""The longest duration a flag takes (a year and a day)."""
_DURATION = re.compile(r"^(\d{1,12}(?:\.\d{1,9})?)([smhd]?)$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0}


def duration_arg(flag: str, text: str) -> float:
    """`text` (`90`, `30s`, `5m`, `2h`, `1d`) in seconds, more than 0 and at most
    `MAX_DURATION_S`; else a usage error naming `--flag`."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise UsageError(f"--{flag} must be a duration such as 30s, 5m, 2h or 1d (got {text!r})")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if not 0 < seconds <= MAX_DURATION_S:
        raise UsageError(f"--{flag} must be more than 0 s and at most {MAX_DURATION_S:.0f} s")
    return seconds


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
