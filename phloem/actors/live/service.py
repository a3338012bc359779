"""The `live` service: opens Gemini Live sessions and routes requests to them.

In the tree it is a small subtree (`rest_for_one`)::

    live                supervisor
    ├── service         LiveService (actor path `live/service`), owner of the socket loop
    └── sessions        simple_one_for_one; every session a temporary `LiveSession`

(stopping runs in reverse: sessions close their sockets before the loop stops).

`LiveOpen` validates the config (`options`), takes a slot under `[live]
session_limit` (a counter, so the limit holds without enumerating children), binds a
`live_…` ref to the caller (its sessions close when it goes away) and an owner-bound
topic `live/<ref>` (at most `max_subscribers` subscribers, each with a pending queue of
`max_subscriber_messages` / `max_subscriber_bytes`), and starts the session actor; it
returns before the session is `ready`. `LiveSend`, `LiveStatus` and `LiveClose` are
handed to the session actor, which answers them itself. `LiveList` lists every session
(number, state, model, reconnects; never refs).

The API key is read from the environment variable `[live] api_key_env` when a session
opens and goes to the socket layer only. Google's endpoint (the default `base_url`) needs
one: without it `LiveOpen` is `config_invalid`, naming the variable, before any dial (any
other endpoint, such as the fake server on loopback, may take none).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import msgspec

from phloem.actors.live.options import parse_options
from phloem.actors.live.protocol import (
    LIVE_REF_KIND,
    LiveClose,
    LiveList,
    LiveOpen,
    LiveOpened,
    LiveRequest,
    LiveSend,
    LiveStatus,
    topic_name,
)
from phloem.actors.live.session import (
    CloseSession,
    Forward,
    LiveSession,
    SessionInfo,
    SessionSpec,
)
from phloem.actors.live.settings import DEFAULT_BASE_URL, LiveConfig
from phloem.actors.live.tools import declarations, toolbox
from phloem.actors.live.transport import LiveLoop
from phloem.actors.services import DEFER, Call, ServiceActor, ServiceContext, register_service
from phloem.base.logs import get_logger
from phloem.protocols import live as wire
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.supervision.actor import ActorHandle
from phloem.supervision.reasons import ExitReason
from phloem.supervision.spec import ChildSpec, Strategy, SupervisorChild, SupervisorSpec
from phloem.supervision.supervisor import SupervisorRef, sibling_of
from phloem.tools.contract import Tool

log = get_logger("phloem.live")

SESSION_STOP_TIMEOUT_S = 5.0


class _Entry:
    __slots__ = ("handle", "info")

    def __init__(self, info: SessionInfo) -> None:
        self.info = info
        self.handle: ActorHandle | None = None


def endpoint(config: LiveConfig) -> str:
    """The WebSocket URL: `base_url` + the versioned BidiGenerateContent path."""
    base = config.base_url.rstrip("/")
    if urlsplit(base).path:
        raise PhloemError(ErrorKind.CONFIG_INVALID, "live.base_url must have no path")
    return base + wire.ws_path(config.api_version)


def needs_key(config: LiveConfig) -> bool:
    """Whether `base_url` is Google's Live endpoint, which refuses a session without a key."""
    return urlsplit(config.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname


class LiveService(ServiceActor):
    """Answers `LiveRequest`s; see the module docstring."""

    request_type = LiveRequest
    # Sends and status reads only resolve the ref and pass the call to the session
    # (handled there at once when it is idle): no hop through this actor's thread.
    caller_thread_requests = (LiveSend, LiveStatus)

    def on_start(self) -> None:
        self.cfg: LiveConfig = getattr(self.ctx.config, "live", None) or LiveConfig()
        self.url = endpoint(self.cfg)
        self.toolbox = toolbox(self.ctx.resources.assembly(self.ctx.config), self.cfg)
        self.ctx.refs.define_kind(LIVE_REF_KIND)
        self.loop = LiveLoop()
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._open = 0
        self._sessions: dict[int, _Entry] = {}
        self._sessions_sup: SupervisorRef | None = None

    def on_stop(self) -> None:
        super().on_stop()
        self.loop.stop()

    def _supervisor(self) -> SupervisorRef:
        if self._sessions_sup is None:
            me = self._phloem_handle
            sup = sibling_of(me, "sessions") if me is not None else None
            if not isinstance(sup, SupervisorRef):
                raise PhloemError(
                    ErrorKind.LIVE_UNAVAILABLE, "the Live sessions supervisor is down"
                )
            self._sessions_sup = sup
        return self._sessions_sup

    def handle(self, message: Any, call: Call) -> Any:
        match message:
            case LiveOpen():
                return self._open_session(message, call)
            case LiveList():
                return self.list_sessions()
            case LiveClose(ref=ref):
                self._session(call, ref).tell(CloseSession("client_closed", call))
                return DEFER
            case LiveSend(ref=ref) | LiveStatus(ref=ref):
                self._session(call, ref).tell_here(Forward(call, message))
                return DEFER
        raise PhloemError(ErrorKind.BAD_MESSAGE, "unknown live request")

    def _session(self, call: Call, ref: str) -> ActorHandle:
        entry = self.ctx.refs.resolve(ref, call.owner, LIVE_REF_KIND.name)
        assert isinstance(entry, _Entry)
        if entry.handle is None or not entry.handle.is_alive():
            raise PhloemError(ErrorKind.LIVE_SESSION_CLOSED, "the Live session has closed")
        return entry.handle

    def list_sessions(self) -> list[dict[str, Any]]:
        with self._lock:
            entries = sorted(self._sessions.items())
        return [
            {
                "session": number,
                "state": e.info.state,
                "model": e.info.model,
                "reconnects": e.info.reconnects,
                "turn_epoch": e.info.turn_epoch,
                "generation_epoch": e.info.generation_epoch,
                "owner": e.info.owner,
                "opened_at": e.info.opened_at,
            }
            for number, e in entries
        ]

    # -- opening -------------------------------------------------------------------------

    def _open_session(self, message: LiveOpen, call: Call) -> LiveOpened:
        options = parse_options(message.config, self.cfg.model)
        box = None
        if self.toolbox.tools or self.toolbox.toolsets:
            box = dataclasses.replace(self.toolbox, tools=self.toolbox.now(), toolsets=())
            options = _with_managed_tools(options, box.tools)
        api_key = os.environ.get(self.cfg.api_key_env) or None
        if api_key is None and needs_key(self.cfg):
            raise PhloemError(
                ErrorKind.CONFIG_INVALID,
                f"the Live endpoint needs an API key: environment variable "
                f"{self.cfg.api_key_env} ([live] api_key_env) is not set in the daemon's "
                f"environment",
            )
        with self._lock:
            if self._open >= self.cfg.session_limit:
                raise PhloemError(
                    ErrorKind.LIVE_SESSION_LIMIT,
                    f"{self._open} Live sessions are open; live.session_limit is "
                    f"{self.cfg.session_limit}",
                )
            self._open += 1
        number = next(self._numbers)
        info = SessionInfo(number, options.setup.model, call.owner.label or call.owner.id)
        entry = _Entry(info)
        released = threading.Event()

        def release(_: Any = None) -> None:
            if not released.is_set():
                released.set()
                with self._lock:
                    self._open -= 1
                    self._sessions.pop(number, None)

        try:
            ref = self.ctx.refs.create(
                call.owner, entry, lambda reason: _owner_gone(entry, reason), LIVE_REF_KIND.name
            )
        except BaseException:
            release()
            raise
        try:
            topic = self.open_topic(
                topic_name(str(ref)),
                owner=call.owner,
                max_subscribers=self.cfg.max_subscribers,
                max_pending_messages=self.cfg.max_subscriber_messages,
                max_pending_bytes=self.cfg.max_subscriber_bytes,
            )
            spec = SessionSpec(
                info,
                options,
                topic,
                self.loop,
                self.url,
                api_key,
                self.cfg,
                box,
                self.ctx.interceptors.chain(),
                self.ctx.resources.launcher("tools"),
            )
            handle = self._supervisor().start_child((spec,))
        except BaseException as exc:
            self.ctx.refs.discard(ref)
            release()
            if isinstance(exc, PhloemError):
                raise
            raise PhloemError(ErrorKind.LIVE_UNAVAILABLE, "the Live session did not start") from exc
        assert isinstance(handle, ActorHandle)
        entry.handle = handle
        with self._lock:
            self._sessions[number] = entry

        def ended(reason: ExitReason) -> None:
            release()
            self.ctx.refs.discard(ref)
            if not topic.closed:
                topic.close(reason)

        handle.add_exit_callback(ended)
        if call.owner.is_down:
            _owner_gone(entry, ExitReason.owner_down())
        return LiveOpened(str(ref))


def _owner_gone(entry: _Entry, reason: ExitReason) -> None:
    handle = entry.handle
    if handle is None:
        return
    try:
        handle.actor_ref.tell(CloseSession("owner_gone"))
    except Exception:
        pass  # it already ended


def _with_managed_tools(options: Any, tools: Mapping[str, Tool]) -> Any:
    """Declare the managed tools the client did not declare itself."""
    setup = options.setup
    declared = {f.name for t in (setup.tools or []) for f in (t.function_declarations or [])}
    extra = [d for d in declarations(tools) if d.name not in declared]
    if not extra:
        return options
    new_tools = [*(setup.tools or []), wire.ToolDeclaration(function_declarations=extra)]
    return dataclasses.replace(options, setup=msgspec.structs.replace(setup, tools=new_tools))


def session_child_spec() -> ChildSpec:
    return ChildSpec(
        "live-session", LiveSession, restart="temporary", shutdown=SESSION_STOP_TIMEOUT_S
    )


def live_service(ctx: ServiceContext) -> ChildSpec:
    """The `live` subtree: the service, then the sessions supervisor (rest_for_one)."""
    sessions = ChildSpec(
        "sessions",
        SupervisorChild(
            SupervisorSpec(Strategy.SIMPLE_ONE_FOR_ONE, intensity=0), [session_child_spec()]
        ),
        restart="permanent",
    )
    service = ChildSpec("service", (LiveService, (ctx,), {}), shutdown=15.0)
    return ChildSpec(
        ctx.name,
        SupervisorChild(SupervisorSpec(Strategy.REST_FOR_ONE), [service, sessions]),
        restart="permanent",
    )


register_service("live", live_service)
