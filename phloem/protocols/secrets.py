"""Which keys hold credentials: one rule for every public boundary.

A key is credential-shaped when, lower-cased with `_ - . : space` removed, it equals one of
`SECRET_KEYS_EXACT` or contains one of `SECRET_KEY_PARTS`, or contains `token` — except a
token *count*: a key ending in `tokens`, `tokencount`, `tokenscount` or `tokensdetails`
whose value is a number or a mapping (`max_tokens`, `input_tokens`, `usage.output_tokens`)
is kept. The reference removed every key containing "token", losing usage figures.
Plans, results, agent state and `phloem config check` all use this rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_KEYS_EXACT = frozenset(
    {"bearer", "otp", "pin", "auth", "sessionid", "sid", "jwt", "dsn", "passphrase"}
)
SECRET_KEY_PARTS = (
    "apikey",
    "privatekey",
    "signingkey",
    "accesskey",
    "clientassertion",
    "cookie",
    "credential",
    "authorization",
    "password",
    "passwd",
    "secret",
)
TOKEN_COUNT_SUFFIXES = ("tokens", "tokencount", "tokenscount", "tokensdetails")
_KEY_STRIP = re.compile(r"[_\-.: ]")


def _normalise_key(key: str) -> str:
    return _KEY_STRIP.sub("", key.lower())


def is_secret_key(key: str, value: Any = None) -> bool:
    """True if `key` (holding `value`) looks like a credential and must be pruned."""
    norm = _normalise_key(key)
    if norm in SECRET_KEYS_EXACT or any(part in norm for part in SECRET_KEY_PARTS):
        return True
    if "token" in norm:
        counts = norm.endswith(TOKEN_COUNT_SUFFIXES)
        countish = value is None or (
            isinstance(value, int | float | Mapping) and not isinstance(value, bool)
        )
        return not (counts and countish)
    return False


def prune_secrets(value: Any) -> Any:
    """`value` without credential-shaped keys, at any depth (see the module docstring)."""
    if isinstance(value, Mapping):
        return {
            k: prune_secrets(v)
            for k, v in value.items()
            if not (isinstance(k, str) and is_secret_key(k, v))
        }
    if isinstance(value, list | tuple):
        return [prune_secrets(v) for v in value]
    return value
