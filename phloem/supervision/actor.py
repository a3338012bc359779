"""In-process actors: a pykka `ThreadingActor` that knows how it ended.

`Actor` adds to pykka what supervision needs: an exit reason recorded exactly once
(normal, shutdown, killed or exception), a synchronous start that reports a failing
`on_start`, a bounded inbox (`max_inbox`; asks beyond it get `backpressure`), and optional
decoding of raw messages against a msgspec type (`message_type`), where a message that
fails to decode is an error to its sender and never reaches the actor.

Actors are started by a supervisor through a `ChildSpec`, which gives each one a place in
the tree; `ActorHandle` is the handle the supervisor holds.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import sys
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar

import msgspec
import pykka
from pykka import messages as pykka_messages
from pykka._envelope import Envelope

from phloem.base.logs import ERROR, get_logger
from phloem.protocols.errors import PhloemError
from phloem.supervision import light as light_kind
from phloem.supervision.handle import (
    ChildHandle,
    ChildStartError,
    ChildState,
    Flag,
    HandleKind,
    HandleStats,
)
from phloem.supervision.owners import enter_actor
from phloem.supervision.reasons import ExitReason
from phloem.supervision.threadpark import run_parked

log = get_logger("phloem.supervision")

# Named limits.
DEFAULT_MAX_INBOX = 10_000
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_ASK_TIMEOUT_S = 30.0


_loop_ids = itertools.count(1)
_urns = itertools.count(1)


class _Wakeup:
    """An inbox entry with no meaning: wakes a killed actor's loop so it can exit."""


_PYKKA_MESSAGES = (
    _Wakeup,
    pykka_messages._ActorStop,
    pykka_messages.ProxyCall,
    pykka_messages.ProxyGetAttr,
    pykka_messages.ProxySetAttr,
)


def tell_if_alive(ref: Any, message: Any) -> None:
    """Tell `message` to the actor behind `ref` (an `ActorRef` or handle) unless it is gone:
    for exit callbacks that report to a service which may itself be stopping. An actor
    that has already ended has nothing to be told (not an error worth a traceback)."""
    with contextlib.suppress(pykka.ActorDeadError):
        ref.tell(message)


class Actor(pykka.ThreadingActor):
    """Base class for phloem's in-process actors.

    Subclass it, implement `on_receive` (and `on_start` / `on_stop` as in pykka), and start
    it through a supervisor. Class attributes:

    - `max_inbox`: messages allowed to wait in the inbox; `ask`/`tell` beyond it fail
      with `backpressure` instead of queueing without bound.
    - `message_type`: a msgspec type; raw `bytes` (msgpack) or mappings sent with
      `ActorHandle.ask_raw` are decoded against it before they are queued.
    - `owns_work`: process children started on its thread are attached to it
      (`owners`); False for supervisors.
    - `light`: True runs it as a light actor (no thread of its own, `light`), False on
      a thread of its own; None (the default) follows `light.set_default_kind`.
    """

    use_daemon_thread: ClassVar[bool] = True
    max_inbox: ClassVar[int] = DEFAULT_MAX_INBOX
    message_type: ClassVar[Any] = None
    # Process children its thread starts are listed under it in the tree (`owners`);
    # a supervisor lists the children of its specs instead.
    owns_work: ClassVar[bool] = True
    light: ClassVar[bool | None] = None

    _phloem_handle: ActorHandle | None = None
    _is_light = False

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        # pykka's fields, made as pykka's `__init__` makes them but cheaper (a restart
        # makes one actor): an urn from a counter, not a uuid (the tree names an actor;
        # the urn only has to be unique here), and a `Flag` for `actor_stopped`.
        self.actor_urn = f"urn:phloem:actor:{next(_urns)}"
        self.actor_inbox = self._create_actor_inbox()
        self.actor_stopped = Flag()
        self._actor_ref = pykka.ActorRef(self)

    def exit(self, reason: ExitReason) -> None:
        """Stop this actor from inside one of its own handlers with the given reason."""
        if self._phloem_handle is not None:
            self._phloem_handle._override_reason(reason)
        self._stop()

    def credit_in_use(self) -> int:
        """Credit this actor currently has outstanding to consumers (for snapshots)."""
        return 0

    # -- pykka extension points ----------------------------------------------------------

    @staticmethod
    def _create_actor_inbox() -> Any:
        # pykka's inbox is a `queue.Queue`: a Python-level lock and condition per put and
        # get. Every request through the daemon crosses one inbox, and the C
        # `SimpleQueue` does the same hand-off (unbounded FIFO, blocking get) for a
        # fraction of the cost; the bound is `max_inbox`, checked before each send.
        return queue.SimpleQueue()

    def _start_actor_loop(self) -> None:
        if light_kind.is_light(self.light):
            self._is_light = True
            light_kind.start(self, self._light_setup)
            return
        # pykka starts a new thread per actor; a parked one (an actor's that just ended,
        # as on a restart) is reused when there is one: see `phloem.supervision.threadpark`.
        name = f"{type(self).__name__}-{next(_loop_ids)}"
        run_parked(self._actor_loop, name, self.use_daemon_thread)

    def _light_setup(self) -> None:
        # In the light actor's own context (`light.Runner`), as a thread's loop would be;
        # pykka's `_actor_loop_setup` (on_start, a failure handled) written out: a
        # restart runs it.
        handle = self._phloem_handle
        enter_actor(handle, self.owns_work)
        try:
            self.on_start()
        except Exception:
            self._handle_failure(*sys.exc_info())
        finally:
            if handle is not None:
                handle._start_failed = self.actor_stopped.is_set()
                handle._started.set()

    def _actor_loop_setup(self) -> None:
        if self._phloem_handle is not None and not self._is_light:
            self._phloem_handle._thread_name = threading.current_thread().name
            self._phloem_handle._native_thread = threading.get_native_id()
        try:
            super()._actor_loop_setup()
        finally:
            handle = self._phloem_handle
            if handle is not None:
                # Read now: a stop right after a successful on_start is not a failed start.
                handle._start_failed = self.actor_stopped.is_set()
                handle._started.set()

    def _actor_loop(self) -> None:
        # The loop runs in a fresh context (`threadpark`): the owner ends with it.
        enter_actor(self._phloem_handle, self.owns_work)
        try:
            super()._actor_loop()
        finally:
            handle = self._phloem_handle
            if handle is not None:
                handle._on_loop_exit()

    def _handle_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Replaces pykka's version, which logs the raw exception text: ours is redacted.
        handle = self._phloem_handle
        if exception_value is not None:
            reason = ExitReason.from_exception(exception_value)  # redacts: made once
            if handle is not None and handle._failure is None:
                handle._failure, handle._failure_reason = exception_value, reason
            if log.enabled_for(ERROR):  # its fields are built only for a line
                log.error_later("actor_failed", actor=str(self), reason=str(reason))
        self.actor_stopped.set()

    def _handle_receive(self, message: Any) -> Any:
        # pykka's messages (a stop, proxy calls) go to pykka; any other to `on_receive`
        # at once (pykka tests each kind first: four tests a message).
        if isinstance(message, _PYKKA_MESSAGES):
            if isinstance(message, _Wakeup):
                return None
            return super()._handle_receive(message)
        return self.on_receive(message)


class ActorHandle(ChildHandle):
    """The handle of a running `Actor`: ask, tell, stop, kill, and its exit reason."""

    kind: HandleKind = "actor"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._started = Flag()
        self._start_failed = False
        self._failure: BaseException | None = None
        self._failure_reason: ExitReason | None = None
        self._stop_requested = False
        self._killed = False
        self._actor: Actor | None = None
        self._thread_name: str | None = None
        self._native_thread: int | None = None

    # -- start ---------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        actor_class: type[Actor],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
    ) -> ActorHandle:
        """Create the actor, run its `on_start` in its own thread, and return once it ran.

        Raises `ChildStartError` when the constructor or `on_start` fails.
        """
        handle = cls(name or actor_class.__name__)
        handle._init_and_start(actor_class, args, kwargs or {}, start_timeout)
        return handle

    def _init_and_start(
        self,
        actor_class: type[Actor],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        start_timeout: float,
    ) -> None:
        try:
            actor = actor_class(*args, **kwargs)
        except Exception as exc:
            reason = ExitReason.from_exception(exc)
            self._set_exit(reason)
            raise ChildStartError(reason) from exc
        self._start_existing(actor, start_timeout)

    def _start_existing(self, actor: Actor, start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Register and start an already constructed actor; return once `on_start` ran."""
        actor._phloem_handle = self
        self._actor = actor
        # Not entered in pykka's global ActorRegistry: the tree is phloem's registry, and
        # that list's removal walks every live actor (a run's end would cost O(live runs)).
        actor._start_actor_loop()
        if not self._started.wait(start_timeout):
            self.kill()
            raise ChildStartError(ExitReason.timeout("on_start did not finish"))
        if self._start_failed:
            reason = self.wait(start_timeout) or ExitReason.timeout("actor did not exit")
            if isinstance(self._failure, ChildStartError):
                raise self._failure
            raise ChildStartError(reason)
        self._state = ChildState.RUNNING

    # -- messaging -----------------------------------------------------------------------

    @property
    def actor_ref(self) -> pykka.ActorRef[Any]:
        assert self._actor is not None
        return self._actor.actor_ref

    @property
    def actor(self) -> Actor:
        """The actor object itself: for the supervision machinery and tests only."""
        assert self._actor is not None
        return self._actor

    def proxy(self) -> Any:
        return self.actor_ref.proxy()

    def mailbox_depth(self) -> int:
        """Messages waiting in the inbox (read without the queue's lock: a reading)."""
        actor = self._actor
        return actor.actor_inbox.qsize() if actor is not None else 0  # type: ignore[attr-defined]

    def _check_can_send(self) -> Actor:
        actor = self._actor
        if actor is None or actor.actor_stopped.is_set() or self._exit_reason is not None:
            raise PhloemError("noproc", f"actor {self.name!r} is not running")
        if actor.actor_inbox.qsize() >= actor.max_inbox:  # type: ignore[attr-defined]
            raise PhloemError(
                "backpressure",
                f"actor {self.name!r} has {actor.max_inbox} messages waiting (max_inbox)",
            )
        return actor

    def tell(self, message: Any) -> None:
        """Queue a message; raises `PhloemError` `noproc` or `backpressure`."""
        self._check_can_send()
        try:
            self.actor_ref.tell(message)
        except pykka.ActorDeadError as exc:
            raise PhloemError("noproc", f"actor {self.name!r} is not running") from exc

    def tell_here(self, message: Any) -> None:
        """`tell`, except that an idle light actor handles `message` in this thread (no
        hand-off to a pool worker; see `light`): for a teller that has nothing better to
        do meanwhile and knows the handler does not block. Raises as `tell`."""
        actor = self._check_can_send()
        if not light_kind.tell_inline(actor, message):
            self.tell(message)

    def ask(self, message: Any, timeout: float | None = DEFAULT_ASK_TIMEOUT_S) -> Any:
        """Send a message and wait for the reply.

        An exception raised by the handler comes back here and the actor keeps running.
        Raises `PhloemError` `noproc`, `backpressure` or `timeout`.
        """
        actor = self._check_can_send()
        if actor._is_light:  # an idle light actor answers in this thread (`light`)
            try:
                handled, reply = light_kind.ask_inline(actor, message)
            except LookupError:
                raise PhloemError("noproc", f"actor {self.name!r} is not running") from None
            if handled:
                return reply
        try:
            future = self.actor_ref.ask(message, block=False)
        except pykka.ActorDeadError as exc:
            raise PhloemError("noproc", f"actor {self.name!r} is not running") from exc
        try:
            return future.get(timeout=timeout)
        except pykka.Timeout as exc:
            raise PhloemError(
                "timeout", f"actor {self.name!r} did not reply in {timeout}s"
            ) from exc
        except pykka.ActorDeadError as exc:
            raise PhloemError("noproc", f"actor {self.name!r} stopped before replying") from exc

    def decode(self, raw: bytes | Mapping[str, Any] | Any) -> Any:
        """Decode a raw message against the actor's `message_type`.

        Raises `PhloemError('bad_message')` with msgspec's path-bearing message.
        """
        actor = self._check_can_send()
        message_type = actor.message_type
        if message_type is None:
            return raw
        try:
            if isinstance(raw, bytes | bytearray | memoryview):
                return msgspec.msgpack.decode(raw, type=message_type)
            return msgspec.convert(raw, message_type)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise PhloemError("bad_message", str(exc)) from exc

    def ask_raw(self, raw: Any, timeout: float | None = DEFAULT_ASK_TIMEOUT_S) -> Any:
        """Decode `raw` against `message_type` (errors go back to the caller), then ask."""
        return self.ask(self.decode(raw), timeout)

    # -- stopping ------------------------------------------------------------------------

    def stop(self, timeout: float | None = 5.0) -> ExitReason:
        if not self.is_alive():
            return self._exit_reason or ExitReason.noproc()
        if timeout is not None and timeout <= 0:
            self.kill()
            return self.wait() or ExitReason.killed()
        self._stop_requested = True
        self._state = ChildState.STOPPING
        with contextlib.suppress(pykka.ActorDeadError):
            self.actor_ref.tell(pykka_messages._ActorStop())
        reason = self.wait(timeout)
        if reason is None:
            self.kill()
            reason = self.wait() or ExitReason.killed()
        return reason

    def kill(self) -> None:
        """Stop the actor without waiting for its current message.

        A thread cannot be interrupted: the actor stops before its next message, and a
        handler stuck forever is abandoned on its daemon thread. Either way the handle
        reports `killed` at once, so a supervisor never hangs on it.
        """
        actor = self._actor
        if actor is None or not self.is_alive():
            return
        self._killed = True
        actor.actor_stopped.set()
        actor.actor_inbox.put(Envelope(_Wakeup()))
        self._set_exit(self._forced or ExitReason.killed())

    def _override_reason(self, reason: ExitReason) -> None:
        self._forced = reason

    def _on_loop_exit(self) -> None:
        if self._forced is not None:
            reason = self._forced
        elif self._failure is not None:
            reason = self._failure_reason or ExitReason.from_exception(self._failure)
        elif self._killed:
            reason = ExitReason.killed()
        elif self._stop_requested:
            reason = ExitReason.shutdown()
        else:
            reason = ExitReason.normal()
        self._set_exit(reason)

    def stats(self) -> HandleStats:
        actor = self._actor
        credit = 0
        if actor is not None and self.is_alive():
            try:
                credit = actor.credit_in_use()
            except Exception:
                credit = 0
        return HandleStats(
            thread=self._thread_name,
            mailbox_depth=self.mailbox_depth(),
            credit_in_use=credit,
            native_thread=self._native_thread if self.is_alive() else None,
        )
