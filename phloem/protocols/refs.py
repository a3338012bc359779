"""The text form of owner-bound refs: `RefKind` (a prefix and its error kinds), `OwnedRef`,
and `parse_ref`, which checks a ref's shape without asking who holds it.

A ref is 128 random bits rendered as a recognisable prefix plus 32 lowercase hex digits
(`ref_` + ..., `run_` + ...), so it crosses the wire and the CLI unchanged and cannot be
guessed. Who may use one is `phloem.supervision.refs.OwnerRegistry`'s business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from phloem.protocols.errors import PhloemError

REF_RANDOM_BITS = 128
REF_HEX_CHARS = REF_RANDOM_BITS // 4
DEFAULT_REF_PREFIX = "ref_"
DEFAULT_REF_KIND = "ref"
MAX_REF_TEXT_CHARS = 64  # refuse to even look at longer input

_PREFIX_SHAPE = re.compile(r"^[a-z][a-z0-9]{0,15}_$")
_KIND_SHAPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True, slots=True)
class RefKind:
    """A kind of ref: its text prefix and the error kinds its operations raise."""

    name: str = DEFAULT_REF_KIND
    prefix: str = DEFAULT_REF_PREFIX
    invalid_error: str = "invalid_ref"
    not_owner_error: str = "not_owner"
    too_many_error: str = "too_many_refs"

    def __post_init__(self) -> None:
        if not _KIND_SHAPE.match(self.name):
            raise ValueError("name must match [a-z][a-z0-9_]{0,31}")
        if not _PREFIX_SHAPE.match(self.prefix):
            raise ValueError("prefix must match [a-z][a-z0-9]{0,15}_")
        for field_name in ("invalid_error", "not_owner_error", "too_many_error"):
            if not _KIND_SHAPE.match(getattr(self, field_name)):
                raise ValueError(f"{field_name} must be a snake_case error kind")

    def new_text(self) -> str:
        import secrets  # issuing refs is the daemon's business; a client checks their shape

        return self.prefix + secrets.token_hex(REF_RANDOM_BITS // 8)

    def is_well_formed(self, text: object) -> bool:
        if not isinstance(text, str) or len(text) != len(self.prefix) + REF_HEX_CHARS:
            return False
        if not text.startswith(self.prefix):
            return False
        return all(c in "0123456789abcdef" for c in text[len(self.prefix) :])


DEFAULT_KIND = RefKind()


@dataclass(frozen=True, slots=True)
class OwnedRef:
    """An issued ref. `str(ref)` (or `ref.text`) is the opaque form to hand out."""

    text: str
    kind: str = DEFAULT_REF_KIND

    def __str__(self) -> str:
        return self.text


def parse_ref(text: object, kind: RefKind = DEFAULT_KIND) -> OwnedRef:
    """Validate the shape of `text` as a ref of `kind` (no ownership check)."""
    if not kind.is_well_formed(text):
        raise PhloemError(kind.invalid_error, f"malformed {kind.name} ref")
    assert isinstance(text, str)
    return OwnedRef(text, kind.name)
