"""Owner-bound refs: opaque handles that only their owner may use.

A ref names a resource held on behalf of an *owner* (an actor or a client connection):
a planning run, a subscription, an agent session. Refs are 128 random bits rendered as
text with a recognisable prefix (`ref_` + 32 lowercase hex digits), so they can cross the
wire and the CLI unchanged and cannot be guessed.

Rules (DESIGN.md, "Refs"):
- a malformed ref → `invalid_ref`;
- a well-formed ref held by another owner → `not_owner`;
- a well-formed ref that nobody holds (never issued, released, or already cancelled) is
  also `not_owner`: answering differently would tell a prober which refs exist;
- when an owner goes down (`owner_down`), every ref it held is forgotten and its
  `on_cancel(ExitReason.owner_down())` is called, exactly once per ref.

Each ref *kind* may carry its own prefix and error names (the planning runtime uses
`invalid_planning_ref` / `not_planning_owner`): define it once with `define_kind`. The
text form (`RefKind`, `OwnedRef`, `parse_ref`) is a wire format, in `phloem.protocols.refs`.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from phloem.base.logs import get_logger
from phloem.protocols.errors import PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.refs import (
    DEFAULT_KIND,
    DEFAULT_REF_KIND,
    MAX_REF_TEXT_CHARS,
    REF_HEX_CHARS,
    OwnedRef,
    RefKind,
)
from phloem.supervision.reasons import ExitReason

log = get_logger("phloem.supervision.refs")

DEFAULT_MAX_REFS_PER_OWNER = 10_000
MAX_REFS_PER_OWNER_RANGE = (1, 1_000_000)

CancelCallback = Callable[[ExitReason], None]
OwnerKind = Literal["actor", "connection", "client"]


class Owner:
    """An identity that can hold refs: an actor, a socket connection or an in-process client.

    Owners compare by `id`. `label` is a human hint for logs (never used for access).
    `uid` is the user behind the owner: a connection's peer uid (SO_PEERCRED), this
    process's uid for an in-process owner; a durable run is reattached by its uid only.
    An owner that went down stays down: `create` for it is refused with `owner_down`.
    """

    __slots__ = ("_down", "id", "kind", "label", "uid")

    def __init__(self, kind: OwnerKind, label: str = "", uid: int | None = None) -> None:
        if kind not in ("actor", "connection", "client"):
            raise ValueError("kind must be 'actor', 'connection' or 'client'")
        self.kind: OwnerKind = kind
        self.id = f"owner-{secrets.token_hex(8)}"
        self.label = label
        self.uid = os.getuid() if uid is None else uid
        self._down = threading.Event()

    @classmethod
    def actor(cls, handle: Any) -> Owner:
        """The owner identity of an actor handle (labelled with its name)."""
        return cls("actor", str(getattr(handle, "name", handle)))

    @classmethod
    def connection(cls, label: str = "", uid: int | None = None) -> Owner:
        return cls("connection", label, uid)

    @classmethod
    def client(cls, label: str = "", uid: int | None = None) -> Owner:
        return cls("client", label, uid)

    @property
    def is_down(self) -> bool:
        return self._down.is_set()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Owner) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        state = " down" if self.is_down else ""
        return f"<Owner {self.kind} {self.label!r} {self.id}{state}>"


@dataclass(slots=True)
class _Entry:
    owner: Owner
    kind: str
    resource: Any
    on_cancel: CancelCallback


class OwnerRegistry:
    """Issues owner-bound refs, resolves them for their owner only, cancels on owner death.

    Thread-safe. Each owner may hold at most `max_refs_per_owner` refs at once (beyond it,
    `create` raises the kind's `too_many_refs`). `on_cancel` callbacks run outside the
    registry's lock; an exception in one is logged and does not stop the others.
    """

    def __init__(self, max_refs_per_owner: int = DEFAULT_MAX_REFS_PER_OWNER) -> None:
        self.max_refs_per_owner = check_range(
            "max_refs_per_owner", max_refs_per_owner, *MAX_REFS_PER_OWNER_RANGE
        )
        self._lock = threading.Lock()
        self._kinds: dict[str, RefKind] = {DEFAULT_KIND.name: DEFAULT_KIND}
        self._entries: dict[str, _Entry] = {}
        self._by_owner: dict[str, dict[str, None]] = {}  # owner id -> ordered ref texts

    # -- kinds ---------------------------------------------------------------------------

    def define_kind(self, kind: RefKind) -> RefKind:
        """Register a ref kind (idempotent for an identical definition)."""
        with self._lock:
            existing = self._kinds.get(kind.name)
            if existing is not None and existing != kind:
                raise ValueError(f"ref kind {kind.name!r} is already defined differently")
            if any(k.prefix == kind.prefix and k.name != kind.name for k in self._kinds.values()):
                raise ValueError(f"prefix {kind.prefix!r} is already used by another kind")
            self._kinds[kind.name] = kind
            return kind

    def _kind(self, name: str) -> RefKind:
        try:
            return self._kinds[name]
        except KeyError:
            raise ValueError(f"unknown ref kind {name!r}; define it with define_kind") from None

    # -- operations ----------------------------------------------------------------------

    def create(
        self,
        owner: Owner,
        resource: Any,
        on_cancel: CancelCallback,
        kind: str = DEFAULT_REF_KIND,
    ) -> OwnedRef:
        """Bind `resource` to `owner` under a fresh ref; `on_cancel` runs if the owner dies."""
        if not isinstance(owner, Owner):
            raise TypeError("owner must be an Owner")
        if not callable(on_cancel):
            raise TypeError("on_cancel must be callable")
        with self._lock:
            ref_kind = self._kind(kind)
            if owner.is_down:
                raise PhloemError("owner_down", f"owner {owner.id} is down")
            held = self._by_owner.setdefault(owner.id, {})
            if len(held) >= self.max_refs_per_owner:
                raise PhloemError(
                    ref_kind.too_many_error,
                    f"owner holds {len(held)} refs; max_refs_per_owner is "
                    f"{self.max_refs_per_owner}",
                )
            text = ref_kind.new_text()
            while text in self._entries:  # 128 random bits: practically never loops
                text = ref_kind.new_text()
            self._entries[text] = _Entry(owner, ref_kind.name, resource, on_cancel)
            held[text] = None
        return OwnedRef(text, ref_kind.name)

    def resolve(self, ref: str | OwnedRef, owner: Owner, kind: str = DEFAULT_REF_KIND) -> Any:
        """The resource behind `ref`, for its owner only (else the kind's error)."""
        with self._lock:
            return self._check(ref, owner, kind).resource

    def release(self, ref: str | OwnedRef, owner: Owner, kind: str = DEFAULT_REF_KIND) -> Any:
        """Forget `ref` without cancelling it (the owner is done with it); its resource."""
        with self._lock:
            entry = self._check(ref, owner, kind)
            self._remove(str(ref), entry)
            return entry.resource

    def discard(self, ref: str | OwnedRef) -> bool:
        """Forget `ref` whoever holds it (the resource ended by itself); False if unknown."""
        with self._lock:
            entry = self._entries.get(str(ref))
            if entry is None:
                return False
            self._remove(str(ref), entry)
            return True

    def owner_down(self, owner: Owner, detail: str | None = None) -> int:
        """Mark `owner` down, cancel and forget everything it held; how many refs."""
        with self._lock:
            owner._down.set()
            texts = list(self._by_owner.pop(owner.id, {}))
            entries = [self._entries.pop(t) for t in texts]
        reason = ExitReason.owner_down(detail)
        for text, entry in zip(texts, entries, strict=True):
            try:
                entry.on_cancel(reason)
            except Exception:
                log.exception("ref_cancel_failed", ref_kind=entry.kind, owner=owner.id)
            log.debug("ref_cancelled", ref=text[:8], owner=owner.id)
        return len(entries)

    # -- readings ------------------------------------------------------------------------

    def count(self, owner: Owner | None = None) -> int:
        """Refs held by `owner`, or by everyone."""
        with self._lock:
            if owner is None:
                return len(self._entries)
            return len(self._by_owner.get(owner.id, ()))

    def refs_of(self, owner: Owner) -> list[OwnedRef]:
        with self._lock:
            return [OwnedRef(t, self._entries[t].kind) for t in self._by_owner.get(owner.id, ())]

    # -- internals -----------------------------------------------------------------------

    def _check(self, ref: str | OwnedRef, owner: Owner, kind: str) -> _Entry:
        ref_kind = self._kind(kind)
        text = ref.text if isinstance(ref, OwnedRef) else ref
        if not isinstance(text, str) or len(text) > MAX_REF_TEXT_CHARS:
            raise PhloemError(ref_kind.invalid_error, f"malformed {ref_kind.name} ref")
        if not ref_kind.is_well_formed(text):
            raise PhloemError(
                ref_kind.invalid_error,
                f"malformed {ref_kind.name} ref {text!r}: expected "
                f"{ref_kind.prefix!r} followed by {REF_HEX_CHARS} hex digits",
            )
        entry = self._entries.get(text)
        if entry is None or entry.owner.id != owner.id or entry.kind != ref_kind.name:
            raise PhloemError(
                ref_kind.not_owner_error, f"{ref_kind.name} ref is not held by this owner"
            )
        return entry

    def _remove(self, text: str, entry: _Entry) -> None:
        del self._entries[text]
        held = self._by_owner.get(entry.owner.id)
        if held is not None:
            held.pop(text, None)
            if not held:
                del self._by_owner[entry.owner.id]

    def __repr__(self) -> str:
        return f"<OwnerRegistry {self.count()} refs, {len(self._by_owner)} owners>"
