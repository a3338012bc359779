"""Which keys hold credentials: one rule for every public boundary.

A key is credential-shaped when, lower-cased with `_ - . : space` removed, it equals one of
`SECRET_KEYS_EXACT` or contains one of `SECRET_KEY_PARTS`, or contains `token` — except a
token *count*: a key ending in `tokens`, `tokencount`, `tokenscount` or `tokensdetails`
whose value is a number or a mapping (`max_tokens`, `input_tokens`, `usage.output_tokens`)
is kept. The reference removed every key containing "token", losing usage figures.
Plans, results, agent state and `phloem config check` all use this rule.

`redact(text)` is the one redaction of free text, built on the same rule: every
`key=value`, `key: value`, `'key': 'value'` or `"key": "value"` (a dict repr, JSON, a
header, a query string) whose key `is_secret_key` loses its value — a quoted string, a
bracketed `{...}`/`[...]`, or a bare word, after an auth scheme (`Authorization: Bearer
X` keeps `Bearer`) — and so do credentials after `Bearer`/`Basic` on their own, URL
user-info passwords, and well-known key shapes (`sk-…`, `AIza…`, `ghp_…`, JWTs, ...).
`redact_value(value)` applies it to JSON-like data: secret keys pruned, strings redacted.
Every error text, reason and log field that leaves phloem goes through one of them.

`secret_paths(value)` is the same rule as a *mark* instead of a rewrite: the JSON Pointers
of the values `redact_value` would prune or change. A confirmation shows its owner the
exact arguments that will run, so it marks secret-looking values rather than hiding them
(a rewritten command is not the command that runs).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"
MAX_MESSAGE_CHARS = 2_000
"""`redact` caps a text at this many characters (plus `…`) unless told otherwise, so an
error can never carry a whole response body."""

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


KEY_CLASS_CACHE = 4_096
"""Key names whose class `is_secret_key` remembers: the same few names come back."""
KEY_CLASS_CACHE_CHARS = 64
"""Only names this long at most are remembered, so the cache stays small."""

_PLAIN, _SECRET, _TOKEN, _TOKEN_COUNT = range(4)


def _key_class(key: str) -> int:
    return _cached_class_of(key) if len(key) <= KEY_CLASS_CACHE_CHARS else _class_of(key)


def _class_of(key: str) -> int:
    """What the name alone says: plain, secret, a token, or a token count's name."""
    norm = _normalise_key(key)
    if norm in SECRET_KEYS_EXACT or any(part in norm for part in SECRET_KEY_PARTS):
        return _SECRET
    if "token" in norm:
        return _TOKEN_COUNT if norm.endswith(TOKEN_COUNT_SUFFIXES) else _TOKEN
    return _PLAIN


_cached_class_of = functools.lru_cache(maxsize=KEY_CLASS_CACHE)(_class_of)


def is_secret_key(key: str, value: Any = None) -> bool:
    """True if `key` (holding `value`) looks like a credential and must be pruned."""
    kind = _key_class(key)
    if kind == _TOKEN_COUNT:  # a count is kept: a number or a mapping of numbers
        countish = value is None or (
            isinstance(value, int | float | Mapping) and not isinstance(value, bool)
        )
        return not countish
    return kind != _PLAIN


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


def redact_value(value: Any, *, limit: int | None = None) -> Any:
    """`value` with credential-shaped keys pruned and every string `redact`ed, at any
    depth (tuples become lists, as in JSON); each string is capped at `limit` chars."""
    if isinstance(value, str):
        return redact(value, limit=limit)
    if isinstance(value, Mapping):
        return {
            k: redact_value(v, limit=limit)
            for k, v in value.items()
            if not (isinstance(k, str) and is_secret_key(k, v))
        }
    if isinstance(value, list | tuple):
        return [redact_value(v, limit=limit) for v in value]
    return value


MAX_SECRET_PATHS = 64
"""`secret_paths` names at most this many values (the first ones, in document order)."""


def _pointer_token(key: str | int) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def secret_paths(value: Any, *, limit: int = MAX_SECRET_PATHS) -> list[str]:
    """JSON Pointers (RFC 6901, `/env/API_KEY`) of the values in `value` that look like
    secrets: the value of every credential-shaped key, and every string `redact` would
    change. Found without recursion, in document order, at most `limit` of them."""
    found: list[str] = []
    stack: list[tuple[str, Any, bool]] = [("", value, False)]  # (pointer, value, secret key)
    while stack and len(found) < limit:
        path, item, keyed = stack.pop()
        if keyed or (isinstance(item, str) and redact(item, limit=None) != item):
            found.append(path)
        elif isinstance(item, Mapping):
            stack.extend(
                (f"{path}/{_pointer_token(k)}", v, isinstance(k, str) and is_secret_key(k, v))
                for k, v in reversed(list(item.items()))
            )
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}/{i}", v, False) for i, v in reversed(list(enumerate(item))))
    return found


# --- free text --------------------------------------------------------------------------

_AUTH_SCHEMES = ("bearer", "basic", "digest", "token", "negotiate", "ntlm", "apikey")
_BARE_SCHEMES = ("bearer", "basic")  # whose credential goes even with no key before it


_KEY_SHAPES = (
    ("sk-", r"[A-Za-z0-9_\-]{16,}"),  # OpenAI-style keys
    ("AIza", r"[0-9A-Za-z_\-]{20,}"),  # Google API keys
    ("gh[pousr]_", r"[A-Za-z0-9]{20,}"),  # GitHub tokens
    ("xox[abprs]-", r"[A-Za-z0-9\-]{10,}"),  # Slack tokens
    ("AKIA", r"[0-9A-Z]{16}\b"),  # AWS access key ids
    ("eyJ", r"[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{5,}"),  # JWTs
)
"""Well-known credential shapes, as (head, tail) regexes: `redact` looks for any head
before it runs the full patterns."""


class _Patterns:
    """The patterns of `redact`, compiled on its first call: compiling them costs ~10 ms,
    which a process that redacts nothing (a CLI command that succeeds) need not pay."""

    def __init__(self) -> None:
        # a key (optionally quoted, also with escaped quotes as in a repr of a repr) and
        # its separator; the value is read by `_value_end`
        self.key_sep = re.compile(r"(?<![\w.\-])(\\?[\"']?)([A-Za-z_][\w.\-]*)\1(\s*[:=]\s*)")
        bare = "|".join(_BARE_SCHEMES)
        self.scheme = re.compile(r"(?i)\b(" + bare + r")(\s+)([A-Za-z0-9._~+/=\-]{8,})")
        self.scheme_prefix = re.compile(r"(?i)(?:" + "|".join(_AUTH_SCHEMES) + r")\s+(?=\S)")
        self.url_password = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/:@]+:)([^\s/@]+)(@)")
        self.key_shapes = tuple(re.compile(r"\b" + head + tail) for head, tail in _KEY_SHAPES)
        self.bare_end = re.compile(r"[\s,;&}\])\"'<>]")
        # What one of the patterns above needs somewhere in the text — a key's or a URL's
        # separator, a scheme's word, a key shape's head: a text without any is left as it
        # is after one scan instead of ten (most texts redacted are names and short notes).
        heads = "|".join(head for head, _ in _KEY_SHAPES)
        self.suspect = re.compile(r"[:=]|(?i:" + bare + ")|" + heads)
        self.number = re.compile(r"-?\d+(?:\.\d+)?")


@functools.cache
def _patterns() -> _Patterns:
    return _Patterns()


def redact(
    text: str, secrets: tuple[str, ...] = (), *, limit: int | None = MAX_MESSAGE_CHARS
) -> str:
    """`text` without credentials (see the module docstring) and without any of the
    explicitly given `secrets`, capped at `limit` characters (None: no cap)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    patterns = _patterns()
    if patterns.suspect.search(text) is not None:
        text = _redact_pairs(text)
        text = patterns.scheme.sub(_scheme_sub, text)
        text = patterns.url_password.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", text)
        for pattern in patterns.key_shapes:
            text = pattern.sub(REDACTED, text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return text


def _scheme_sub(m: re.Match[str]) -> str:
    """`Bearer X` / `Basic X` outside a key: X goes if it looks like a credential (so
    "Basic authentication failed" stays)."""
    word = m.group(3)
    credential = any(c.isdigit() or c in "+/=_.~-" for c in word) or any(
        c.isupper() for c in word[1:]
    )
    return f"{m.group(1)}{m.group(2)}{REDACTED}" if credential else m.group(0)


def _redact_pairs(text: str) -> str:
    patterns = _patterns()
    out: list[str] = []
    pos = 0
    for m in patterns.key_sep.finditer(text):
        if m.start() < pos:
            continue  # inside a value already redacted
        start = m.end()
        if not is_secret_key(m.group(2), "") or text.startswith(REDACTED, start):
            continue  # ("" as the value: a key secret for no value is skipped at once)
        first = text[start : start + 1]
        if first and first in "{[" and not is_secret_key(m.group(2), {} if first == "{" else []):
            continue  # not scanned: each bracket is read at most once (linear time)
        end, guess, inner = _value_end(text, start)
        if end == start or not is_secret_key(m.group(2), guess):
            continue
        a, b = inner
        prefix = patterns.scheme_prefix.match(text, a, b)
        if prefix is not None and prefix.end() < b:
            a = prefix.end()
        if text.startswith(REDACTED, a) and a + len(REDACTED) == b:
            continue  # redacted before
        if text[start] in "{[":
            quote = m.group(1).lstrip("\\")
            out.append(text[pos:start] + f"{quote}{REDACTED}{quote}")
        else:
            out.append(text[pos:a] + REDACTED + text[b:end])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _value_end(text: str, start: int) -> tuple[int, Any, tuple[int, int]]:
    """Where the value at `start` ends, a guess at its type (for the token-count rule),
    and the span of what to redact."""
    if text.startswith(("\\'", '\\"'), start):
        close = text.find(text[start : start + 2], start + 2)
        end = len(text) if close < 0 else close + 2
        return end, "", (start + 2, end - 2 if close >= 0 else end)
    first = text[start] if start < len(text) else ""
    if first in "'\"":
        i = start + 1
        while i < len(text) and text[i] != first:
            i += 2 if text[i] == "\\" else 1
        end = min(i + 1, len(text))
        return end, "", (start + 1, min(i, len(text)))
    if first in "{[":
        end = _bracket_end(text, start)
        return end, ({} if first == "{" else []), (start, end)
    patterns = _patterns()
    prefix = patterns.scheme_prefix.match(text, start)
    word_start = prefix.end() if prefix is not None else start
    if text.startswith(REDACTED, word_start):  # redacted before
        return word_start + len(REDACTED), "", (word_start, word_start + len(REDACTED))
    bare = patterns.bare_end.search(text, word_start)
    end = len(text) if bare is None else bare.start()
    word = text[start:end]
    guess: Any = float(word) if patterns.number.fullmatch(word) else word
    return end, guess, (start, end)


def _bracket_end(text: str, start: int) -> int:
    """The index after the bracket that closes the one at `start` (quotes respected)."""
    depth = 0
    quote = ""
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)
