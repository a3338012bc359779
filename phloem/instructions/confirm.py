"""Confirmation: mutating tool calls wait for their owner's yes before they run.

`ConfirmationInterceptor` sits on the tree's interceptor chain for one run. Around a
call of a mutating tool — `write`, `edit`, `bash`, and any other tool whose `read_only`
attribute is not truthy (MCP tools carry their read-only annotation there; function
tools count as mutating unless marked, and so does a tool the lookup does not know) — it
sends a `ConfirmRequest` (a fresh
`call_id`, the tool, its arguments, the pointers of the secret-looking ones) through
`send`, then waits for `answer(call_id, approve)`. Only an approval calls `proceed`.

What is shown is what runs: the arguments are encoded to JSON once; the request carries
those bytes decoded, and an approved call runs with the same bytes decoded afresh — so
nothing the owner did not see reaches the tool (not a redaction, not a later change to
the request's dict). Secret-looking values are not rewritten but marked
(`ConfirmRequest.secrets`, JSON Pointers from `phloem.protocols.secrets.secret_paths`):
a redacted command is a different command. Arguments that do not encode as a JSON object
(at most `MAX_NESTING_DEPTH` deep) cannot be shown, so such a call is refused
(`unshowable`). A refusal, no answer within
`timeout_s`, the owner going away or the run ending (`close`) answer the model with the
tool contract's failure value `{"error": "not_confirmed", "reason": ...}` and the tool
does not run. After `close` nothing is confirmed any more, so a late or replayed
approval cannot start anything.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from phloem.base.logs import get_logger
from phloem.models.interceptors import JSON, CallInfo, Interceptor, ToolCall
from phloem.protocols.depth import check_json_depth
from phloem.protocols.limits import check_range
from phloem.protocols.runs import ConfirmRequest
from phloem.protocols.secrets import secret_paths
from phloem.supervision import fibers

__all__ = [
    "CONFIRMATION_TIMEOUT_RANGE",
    "CONFIRMATION_TIMEOUT_S",
    "MAX_PENDING_CONFIRMATIONS",
    "MUTATING_TOOLS",
    "ConfirmationInterceptor",
    "is_mutating",
    "not_confirmed",
]

log = get_logger("phloem.instructions")

CONFIRMATION_TIMEOUT_S = 60.0
CONFIRMATION_TIMEOUT_RANGE = (0.01, 3_600.0)
MAX_PENDING_CONFIRMATIONS = 64
MUTATING_TOOLS = frozenset({"write", "edit", "bash"})

ToolLookup = Callable[[CallInfo, str], object | None]


def _timeout(value: float) -> float:
    return float(
        check_range("confirmation_timeout_s", value, *CONFIRMATION_TIMEOUT_RANGE, integer=False)
    )


def is_mutating(name: str, tool: object | None) -> bool:
    """Does calling `name` (the tool object when known) need confirmation?"""
    if name in MUTATING_TOOLS or tool is None:
        return True  # not known here (e.g. a toolset's tool): ask, to be safe
    return not bool(getattr(tool, "read_only", False))


def not_confirmed(name: str, reason: str, message: str) -> JSON:
    """The failure value of a call that was not confirmed (also logged)."""
    log.warning("tool_not_confirmed", tool=name, reason=reason)
    return {"error": "not_confirmed", "reason": reason, "message": f"{name}: {message}"}


def _encoded(args: Mapping[str, Any]) -> bytes | None:
    """The arguments as JSON, the one form both shown and run; None if they do not
    encode as a JSON object nested at most `MAX_NESTING_DEPTH` deep."""
    try:
        data = msgspec.json.encode(args)
        check_json_depth(data)
    except (TypeError, ValueError, msgspec.EncodeError, RecursionError):
        return None
    return data if data.startswith(b"{") else None


class _Pending:
    __slots__ = ("approve", "event")

    def __init__(self) -> None:
        self.event = fibers.Latch()  # a run driven as a fiber waits parked
        self.approve = False


class ConfirmationInterceptor(Interceptor):
    """Asks before mutating tool calls run; see the module docstring."""

    name = "confirmation"

    def __init__(
        self,
        send: Callable[[ConfirmRequest], None],
        *,
        tools: Mapping[str, object] | ToolLookup | None = None,
        timeout_s: float = CONFIRMATION_TIMEOUT_S,
        agents: Mapping[str, float] | None = None,
    ) -> None:
        """`agents`, when given, limits confirmation to the calls of those agents, each
        with its own timeout (a planner's sub-agents keep their own settings)."""
        self.timeout_s = _timeout(timeout_s)
        self._agents = None if agents is None else {k: _timeout(v) for k, v in agents.items()}
        self._send = send
        if tools is None or callable(tools):
            self._lookup: ToolLookup = tools or (lambda info, name: None)
        else:
            table = dict(tools)
            self._lookup = lambda info, name: table.get(name)
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._closed: str | None = None

    @property
    def pending(self) -> list[str]:
        with self._lock:
            return list(self._pending)

    def answer(self, call_id: str, approve: bool) -> bool:
        """The owner's decision for `call_id`; False when no such call is waiting."""
        with self._lock:
            pending = self._pending.pop(call_id, None)
        if pending is None:
            return False
        pending.approve = bool(approve)
        pending.event.set()
        return True

    def close(self, reason: str = "the run ended") -> None:
        """Refuse every waiting call and every later one (owner gone, run over)."""
        with self._lock:
            if self._closed is None:
                self._closed = reason
            waiting, self._pending = list(self._pending.values()), {}
        for pending in waiting:
            pending.event.set()

    def tool_call(
        self, info: CallInfo, call: ToolCall, proceed: Callable[[ToolCall], JSON]
    ) -> JSON:
        timeout_s = self.timeout_s
        if self._agents is not None:
            if info.agent not in self._agents:
                return proceed(call)
            timeout_s = self._agents[info.agent]
        if not is_mutating(call.name, self._lookup(info, call.name)):
            return proceed(call)
        shown = _encoded(call.args)
        if shown is None:
            return not_confirmed(
                call.name, "unshowable", "the arguments are not JSON data; they cannot be shown"
            )
        call_id = "call_" + secrets.token_hex(8)
        pending = _Pending()
        with self._lock:
            if self._closed is not None:
                return not_confirmed(call.name, "owner_gone", f"not confirmed: {self._closed}")
            if len(self._pending) >= MAX_PENDING_CONFIRMATIONS:
                return not_confirmed(
                    call.name,
                    "too_many_pending",
                    f"{MAX_PENDING_CONFIRMATIONS} confirmations are already waiting",
                )
            self._pending[call_id] = pending
        args: dict[str, Any] = msgspec.json.decode(shown)
        request = ConfirmRequest(
            call_id, call.name, args, info.agent, timeout_s, secret_paths(args)
        )
        try:
            self._send(request)
        except Exception as exc:
            self._drop(call_id)
            log.warning("confirmation_undelivered", tool=call.name, error=type(exc).__name__)
            return not_confirmed(
                call.name, "undelivered", "the confirmation request could not be sent"
            )
        answered = pending.event.wait(timeout_s)
        if not answered:
            self._drop(call_id)
            if pending.event.is_set():  # answered between the wait and the drop
                answered = True
        if not answered:
            return not_confirmed(
                call.name, "timeout", f"no answer within {timeout_s:g} s; the tool did not run"
            )
        if pending.approve:  # exactly what was shown: the same bytes, decoded afresh
            return proceed(dataclasses.replace(call, args=msgspec.json.decode(shown)))
        with self._lock:
            closed = self._closed
        if closed is not None:
            return not_confirmed(call.name, "owner_gone", f"not confirmed: {closed}")
        return not_confirmed(
            call.name, "denied", "the owner refused the call; the tool did not run"
        )

    def _drop(self, call_id: str) -> None:
        with self._lock:
            self._pending.pop(call_id, None)
