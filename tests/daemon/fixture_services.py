"""Services used by the daemon and tree tests, loaded through `[services.extra]`."""

from __future__ import annotations

import threading
import time
from typing import Any

import msgspec

from phloem.actors.services import DEFER, Call, ServiceActor, ServiceContext
from phloem.supervision.actor import Actor
from phloem.supervision.reasons import ExitReason
from phloem.supervision.spec import ChildSpec


class Hold(msgspec.Struct, frozen=True, tag="hold"):
    """Start 'work' bound to the caller; the reply is its ref."""

    label: str


class Peek(msgspec.Struct, frozen=True, tag="peek"):
    ref: str


class Cancelled(msgspec.Struct, frozen=True, tag="cancelled"):
    """The cancelled holds (`label:reason`); with `wait_for`, reply once that one is in."""

    wait_for: str | None = None


class Crash(msgspec.Struct, frozen=True, tag="crash"):
    pass


class Die(msgspec.Struct, frozen=True, tag="die"):
    """Reply, then end the actor abnormally (its supervisor restarts it)."""


Request = Hold | Peek | Cancelled | Crash | Die

_cancelled: list[str] = []
_cancelled_lock = threading.Lock()
_waiters: list[tuple[str, Call]] = []


def _record(entry: str) -> None:
    with _cancelled_lock:
        _cancelled.append(entry)
        ready = [c for w, c in _waiters if w == entry]
        _waiters[:] = [(w, c) for w, c in _waiters if w != entry]
        snapshot = list(_cancelled)
    for call in ready:
        call.reply(snapshot)


class HolderService(ServiceActor):
    """Binds 'work' to the calling owner; cancellation is recorded (process-wide)."""

    request_type = Request

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, Hold):
            label = message.label

            def on_cancel(reason: ExitReason) -> None:
                _record(f"{label}:{reason.kind.value}")

            return self.ctx.refs.create(call.owner, label, on_cancel).text
        if isinstance(message, Peek):
            return self.ctx.refs.resolve(message.ref, call.owner)
        if isinstance(message, Cancelled):
            with _cancelled_lock:
                if message.wait_for is None or message.wait_for in _cancelled:
                    return list(_cancelled)
                _waiters.append((message.wait_for, call))
                return DEFER
        if isinstance(message, Die):
            call.reply("dying")
            self.exit(ExitReason.from_exception(RuntimeError("die requested")))
            return DEFER
        raise RuntimeError("crash requested with api_key=sk-abcdefghijklmnopqrstuvwxyz")


class Counter(Actor):
    """A plain (non-service) actor: asks get the running total."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, int):
            self.total += message
        return self.total


def counter_factory(ctx: ServiceContext) -> ChildSpec:
    return ChildSpec(id=ctx.name, start=Counter)


SLOW_STOP_S = 1.0


class SlowStopService(ServiceActor):
    """Takes `SLOW_STOP_S` seconds to stop (a service flushing its work on shutdown)."""

    def on_stop(self) -> None:
        time.sleep(SLOW_STOP_S)
        super().on_stop()


def noisy_library_factory(ctx: ServiceContext) -> ChildSpec | None:
    """No service: a library warning through its own stdlib logger at the tree's start,
    as Ray's `ray.init` does in a daemon (tests/test_logs.py)."""
    import logging

    logging.getLogger("some.library").warning("a library's warning, %d", 42)
    return None
