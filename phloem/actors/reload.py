"""Live reconfiguration: what a re-read config can change without a restart.

The daemon re-reads its config file on SIGHUP (`phloem.tree.Tree.reload` does the work,
embedded trees may call it too). Features say what they can apply live by registering a
*reloader* for the top-level config sections they own, at import time of their module
(as they register services):

    register_reloader("agents", ("agents", "providers"), reload_agents)

A reloader gets a `ReloadContext` (the old and new `Config`, and a lookup of running
actors by path) and applies the change, raising to refuse it (its sections then keep
their old values). Every changed key that no reloader covers is reported as needing a
restart, by name (`daemon.max_connections`). Sections applied live become part of the
tree's current config (`ServiceContext.latest()`), so a service restarted later by its
supervisor starts on them too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.base.logs import get_logger
from phloem.protocols.secrets import redact

if TYPE_CHECKING:
    from phloem.config import Config
    from phloem.supervision.actor import ActorHandle

log = get_logger("phloem.reload")

MAX_REPORTED_KEYS = 200
"""Changed keys listed in one report (the count is always exact)."""


@dataclass(frozen=True, slots=True)
class ReloadContext:
    """What a reloader gets: the config in force, the one re-read, running actors."""

    old: Config
    new: Config
    actor: Callable[[str], ActorHandle | None]
    """The running actor at a path (`agents/service`), or None when there is none."""


Apply = Callable[[ReloadContext], None]


@dataclass(frozen=True, slots=True)
class Reloader:
    name: str
    sections: tuple[str, ...]
    apply: Apply


class ReloadReport(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one reload: what changed, what was applied, what was not."""

    changed: list[str]
    """Every changed key (dotted), at most `MAX_REPORTED_KEYS` of them."""
    changed_count: int
    applied: list[str]
    """Reloaders that applied their sections."""
    restart_needed: list[str]
    """Changed keys no reloader covers: they take effect at the next start."""
    failed: list[str]
    """`reloader: reason` for reloaders that refused the change (their sections keep
    their old values)."""


_registry: dict[str, Reloader] = {}
_lock = threading.Lock()


def register_reloader(
    name: str, sections: Iterable[str], apply: Apply, *, replace: bool = False
) -> None:
    """Let `apply` change top-level config `sections` live (see the module docstring)."""
    owned = tuple(sections)
    if not owned or not callable(apply):
        raise ValueError("a reloader needs at least one section and a callable")
    with _lock:
        existing = _registry.get(name)
        if existing is not None and existing.apply is not apply and not replace:
            raise ValueError(f"reloader {name!r} is already registered")
        _registry[name] = Reloader(name, owned, apply)


def reloaders() -> list[Reloader]:
    with _lock:
        return list(_registry.values())


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two configs (tables recursed into; a list
    or any other value compared whole)."""
    a = msgspec.to_builtins(old) if not isinstance(old, dict) else old
    b = msgspec.to_builtins(new) if not isinstance(new, dict) else new
    out: list[str] = []
    for key in sorted(set(a) | set(b), key=str):
        where = f"{prefix}.{key}" if prefix else str(key)
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out.extend(changed_keys(x, y, where))
        elif x != y:
            out.append(where)
    return out


def apply_reload(
    old: Config,
    new: Config,
    actor: Callable[[str], ActorHandle | None],
    extra: Iterable[Reloader] = (),
) -> tuple[ReloadReport, Config]:
    """Run the reloaders whose sections changed; the report and the config now in force
    (`old` with the applied sections taken from `new`). Never raises for a reloader's
    failure: it is reported."""
    changed = changed_keys(old, new)
    touched = {key.split(".", 1)[0] for key in changed}
    ctx = ReloadContext(old, new, actor)
    applied: list[str] = []
    live: set[str] = set()
    failed: list[str] = []
    for reloader in [*reloaders(), *extra]:
        if not touched & set(reloader.sections):
            continue
        try:
            reloader.apply(ctx)
        except Exception as exc:
            reason = redact(f"{type(exc).__name__}: {getattr(exc, 'message', exc)}")
            failed.append(f"{reloader.name}: {reason}")
            continue
        applied.append(reloader.name)
        live |= set(reloader.sections)
    restart = [key for key in changed if key.split(".", 1)[0] not in live]
    fields = {section: getattr(new, section) for section in live & touched}
    current = msgspec.structs.replace(old, **fields) if fields else old
    report = ReloadReport(
        changed=changed[:MAX_REPORTED_KEYS],
        changed_count=len(changed),
        applied=applied,
        restart_needed=restart[:MAX_REPORTED_KEYS],
        failed=failed,
    )
    return report, current
