"""What every handler of `phloem api` shares: the `Api` state (the daemon, the limits,
the access rule, the count of turns served), the session lookup that checks a session
belongs to the request's app and user, and the slot every turn takes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from phloem.config import ApiConfig
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.web.access import Access
from phloem.web.api.daemon import Daemon


@dataclass
class Api:
    """What every handler shares: the daemon, the limits, the access rule."""

    daemon: Daemon
    cfg: ApiConfig
    access: Access
    user: str  # the daemon's `[sessions] user`
    runs: int = 0  # turns being served now (at most `cfg.max_runs`)
    counters: dict[str, int] = field(
        default_factory=lambda: {
            "runs": 0,
            "runs_refused": 0,
            "clients_dropped": 0,
            "live_interruptions": 0,  # `interrupted` events the live sockets passed on
            "live_stale_audio_dropped": 0,  # queued model audio an interruption dropped
        }
    )
    live_leases: set[str] = field(default_factory=set)  # sessions with a live socket open


API = web.AppKey("api", Api)
# The most events a session read back carries (its last ones): the sessions service's
# own bound (`MAX_SHOW_EVENTS`; a test keeps the two equal).
MAX_SESSION_EVENTS = 10_000


def check_user(api: Api, user: str) -> None:
    if user != api.user:
        raise PhloemError(
            ErrorKind.UNKNOWN_SESSION,
            f"user {user!r} has no sessions here: phloem's sessions belong to {api.user!r} "
            "([sessions] user)",
        )


async def find_session(api: Api, app: str, user: str, session_id: str, events: int) -> Any:
    """The session `session_id` of agent `app` (`unknown_session` for another app)."""
    check_user(api, user)
    client = await api.daemon.client()
    detail = await client.session_show(session_id, max_events=events)
    if detail.summary.agent != app:
        raise PhloemError(ErrorKind.UNKNOWN_SESSION, f"app {app!r} has no session {session_id!r}")
    return detail


@contextlib.asynccontextmanager
async def turn_slot(api: Api) -> AsyncIterator[None]:
    if api.runs >= api.cfg.max_runs:
        api.counters["runs_refused"] += 1
        raise PhloemError(
            ErrorKind.BACKPRESSURE, f"{api.cfg.max_runs} turns are being served; try again"
        )
    api.runs += 1
    api.counters["runs"] += 1
    try:
        yield
    finally:
        api.runs -= 1
