"""The aiohttp application of `phloem api`: ADK's API server routes over the daemon.

Routes (ADK's paths and JSON shapes):
`/health` · `/version` · `/list-apps` (the catalogue's LLM agents) ·
`/phloem/stats` (this process's own counters: turns served, refused, clients dropped) ·
`/apps/{app}/users/{user}/sessions` (GET list, POST create) ·
`/apps/{app}/users/{user}/sessions/{id}` (GET, POST create with that id, DELETE) ·
`/run` (a turn's events, as a JSON list) · `/run_sse` (the same as server-sent events,
partial text too when `streaming` is true and the provider streams) · `/run_live` (a
WebSocket bridging a Live session, see live.py) · `/dev-ui/` (see devui.py).
What phloem does not serve — artifacts, memory, state patches, eval sets and results,
traces, build graphs, the agent builder — answers 501 naming it (errors.py).

Every request passes the web view's access rule first (`phloem.web.access`: loopback
and a loopback Host, or the bearer token) and, when it carries an `Origin`, that origin
must be this server (a page elsewhere cannot start a turn). A session's app is its
agent; its user is the daemon's `[sessions] user` (another user has no sessions here).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import msgspec
from aiohttp import web

from phloem._version import __version__
from phloem.agents.events import new_event_id
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.runs import ConfirmRequest
from phloem.web.api import errors, shapes
from phloem.web.api.devui import add_dev_ui
from phloem.web.api.errors import error_response, failure, unsupported
from phloem.web.api.live import run_live
from phloem.web.api.shared import API, MAX_SESSION_EVENTS, Api, check_user, find_session, turn_slot

LLM_AGENT_KIND = "LlmAgent"  # the catalogue kind a session can run (`AgentInfo.kind`)
SESSIONS = "/apps/{app}/users/{user}/sessions"
SESSION = SESSIONS + "/{session_id}"
# The dev UI's own note on a new session (its display name): accepted and not kept.
UI_METADATA_KEY = "__session_metadata__"
BODY_CHUNK_BYTES = 64 * 1024  # a request body is read in pieces of at most this many
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-store"}

log = get_logger("phloem.web.api")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class TooManyEvents(Exception):
    """`/run` collected `max_run_events` events and the turn has one more."""


def _origin_host(origin: str) -> str:
    split = urlsplit(origin)
    return split.netloc.lower()


@web.middleware
async def check_access(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The access rule, the same-origin rule, then the handler; any `PhloemError` it
    raises is its typed answer, and nothing else escapes as a traceback."""
    api = request.app[API]
    host = request.headers.get("Host", "")
    refusal = api.access.refusal(host, request.headers.get("Authorization", ""), None)
    if refusal == 401:
        return failure(
            ErrorKind.PERMISSION_DENIED,
            "this API needs its token: Authorization: Bearer TOKEN",
            401,
        )
    if refusal:
        return failure(ErrorKind.PERMISSION_DENIED, "not a loopback host name", refusal)
    origin = request.headers.get("Origin")
    if origin is not None and _origin_host(origin) != host.lower():
        return failure(ErrorKind.PERMISSION_DENIED, f"origin {origin!r} is not this server", 403)
    try:
        return await handler(request)
    except PhloemError as err:
        return error_response(err)
    except web.HTTPException as exc:
        if exc.status == 404:
            return failure(ErrorKind.UNSUPPORTED, f"no route {request.method} {request.path}", 404)
        if exc.status == 405:
            return failure(ErrorKind.UNSUPPORTED, f"{request.method} {request.path}", 405)
        if exc.status == 413:
            return failure(ErrorKind.LIMIT_EXCEEDED, "request body too large", 413)
        raise
    except Exception as exc:  # a bug: one log line and a typed 500, never a traceback
        log.error("api_request_failed", path=request.path, error=type(exc).__name__)
        return failure(ErrorKind.INTERNAL, f"phloem api failed: {type(exc).__name__}", 500)


async def _body(request: web.Request, what: str) -> dict[str, Any]:
    """The request's JSON object, at most `max_body_bytes` (413 over)."""
    limit = request.app[API].cfg.max_body_bytes
    if (request.content_length or 0) > limit:
        raise PhloemError(ErrorKind.LIMIT_EXCEEDED, f"{what} is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(BODY_CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise PhloemError(ErrorKind.LIMIT_EXCEEDED, f"{what} is larger than {limit} bytes")
        chunks.append(chunk)
    return shapes.parse_body(b"".join(chunks), what)


# --- plain routes ---------------------------------------------------------------------


async def health(request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


async def version(request: web.Request) -> web.StreamResponse:
    info = sys.version_info
    return web.json_response(
        {
            "version": __version__,
            "language": "python",
            "language_version": f"{info.major}.{info.minor}.{info.micro}",
            "server": "phloem",
        }
    )


async def stats(request: web.Request) -> web.StreamResponse:
    """phloem's own counters of this process (not an ADK route)."""
    api = request.app[API]
    return web.json_response({**api.counters, "runs_active": api.runs})


async def _apps(api: Api) -> list[str]:
    client = await api.daemon.client()
    return [a.name for a in await client.list_agents() if a.kind == LLM_AGENT_KIND]


async def list_apps(request: web.Request) -> web.StreamResponse:
    if request.query.get("detailed", "false").lower() == "true":
        return unsupported("detailed app listings", request)
    return web.json_response(await _apps(request.app[API]))


# --- sessions ---------------------------------------------------------------------------


async def list_sessions(request: web.Request) -> web.StreamResponse:
    api = request.app[API]
    app, user = request.match_info["app"], request.match_info["user"]
    if user != api.user:
        return web.json_response([])
    client = await api.daemon.client()
    listed = [s for s in await client.session_list() if s.agent == app]
    return web.json_response([shapes.session_json(s, user) for s in listed])


async def _create(request: web.Request, session_id: str | None, state: Any) -> web.StreamResponse:
    api = request.app[API]
    app, user = request.match_info["app"], request.match_info["user"]
    check_user(api, user)
    if state is not None and not isinstance(state, dict):
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, "state must be a JSON object")
    if {k: v for k, v in (state or {}).items() if k != UI_METADATA_KEY}:
        return unsupported("initial session states", request)
    if app not in await _apps(api):
        raise PhloemError(
            ErrorKind.UNKNOWN_AGENT, f"no app {app!r}: not an LLM agent of the catalogue"
        )
    client = await api.daemon.client()
    sid = await client.session_new(app, None, session_id)
    detail = await client.session_show(sid, max_events=MAX_SESSION_EVENTS)
    return web.json_response(shapes.session_json(detail.summary, user, detail))


async def create_session(request: web.Request) -> web.StreamResponse:
    body = await _body(request, "the new session")
    if shapes.field(body, "events", "events"):
        return unsupported("initial session events", request)
    session_id = shapes.field(body, "sessionId", "session_id")
    if session_id is not None and (not isinstance(session_id, str) or not session_id):
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, "sessionId must be a non-empty string")
    return await _create(request, session_id, body.get("state"))


async def create_session_with_id(request: web.Request) -> web.StreamResponse:
    state = await _body(request, "the session state")
    return await _create(request, request.match_info["session_id"], state)


async def get_session(request: web.Request) -> web.StreamResponse:
    api = request.app[API]
    info = request.match_info
    detail = await find_session(
        api, info["app"], info["user"], info["session_id"], MAX_SESSION_EVENTS
    )
    return web.json_response(shapes.session_json(detail.summary, info["user"], detail))


async def delete_session(request: web.Request) -> web.StreamResponse:
    api = request.app[API]
    info = request.match_info
    await find_session(api, info["app"], info["user"], info["session_id"], 1)
    client = await api.daemon.client()
    await client.session_delete(info["session_id"])
    return web.json_response(None)


# --- turns ------------------------------------------------------------------------------


def _refuse(request: ConfirmRequest) -> bool:
    """A tool call that needs confirmation is refused: ADK's clients cannot answer it."""
    return False


async def _start(request: web.Request) -> tuple[Api, shapes.RunRequest]:
    api = request.app[API]
    run = shapes.run_request(await _body(request, "the run request"))
    await find_session(api, run.app, run.user, run.session_id, 1)
    return api, run


def _failed_event(app: str, result: Any) -> dict[str, Any] | None:
    """An event for a turn that failed without an event saying so (ADK's error fields)."""
    if result.ok or result.error is None:
        return None
    event: dict[str, Any] = {
        "id": new_event_id(),
        "invocationId": "",
        "author": app,
        "timestamp": time.time(),
        "actions": shapes.actions_json(),
        "errorCode": str(result.error.kind),
        "errorMessage": errors.one_line(result.error.message),
    }
    return event


async def run(request: web.Request) -> web.StreamResponse:
    """`/run`: the turn's events (no partial ones), once it has ended."""
    api, req = await _start(request)
    client = await api.daemon.client()
    collected: list[dict[str, Any]] = []
    saw_error = False

    def on_event(event: Any) -> None:
        nonlocal saw_error
        if event.partial:
            return
        if len(collected) >= api.cfg.max_run_events:
            raise TooManyEvents
        saw_error = saw_error or event.error is not None
        collected.append(shapes.event_json(event))

    async with turn_slot(api):
        started = await client.session_start(req.session_id, req.prompt)
        try:
            result = await client.session_follow(
                started, on_event=on_event, on_confirm=_refuse, timeout=api.cfg.turn_timeout_s
            )
        except TooManyEvents:
            await client.session_cancel(req.session_id)
            raise PhloemError(
                ErrorKind.LIMIT_EXCEEDED,
                f"the turn has more than {api.cfg.max_run_events} events ([api] max_run_events);"
                " it was cancelled",
            ) from None
        except asyncio.CancelledError:  # the HTTP client went away
            with contextlib.suppress(PhloemError):
                await client.session_cancel(req.session_id)
            raise
    end = None if saw_error else _failed_event(req.app, result)
    return web.json_response(collected if end is None else [*collected, end])


async def run_sse(request: web.Request) -> web.StreamResponse:
    """`/run_sse`: each event as `data: JSON` as it happens; a failure after the stream
    started is one last `data: {"error": "kind: message"}` (as ADK's server sends)."""
    api, req = await _start(request)
    client = await api.daemon.client()
    response = web.StreamResponse(headers=SSE_HEADERS)
    timeout = api.cfg.write_timeout_s
    saw_error = False

    async def send(payload: Any) -> None:
        data = b"data: " + msgspec.json.encode(payload) + b"\n\n"
        await asyncio.wait_for(response.write(data), timeout)

    async def on_event(event: Any) -> None:
        nonlocal saw_error
        if event.partial and not req.streaming:
            return
        saw_error = saw_error or event.error is not None
        await send(shapes.event_json(event))

    async with turn_slot(api):
        started = await client.session_start(req.session_id, req.prompt)
        try:
            await response.prepare(request)
            result = await client.session_follow(
                started, on_event=on_event, on_confirm=_refuse, timeout=api.cfg.turn_timeout_s
            )
            end = None if saw_error else _failed_event(req.app, result)
            if end is not None:
                await send(end)
        except PhloemError as err:
            with contextlib.suppress(OSError, TimeoutError):
                await send({"error": f"{err.kind}: {errors.one_line(err.message)}"})
        except asyncio.CancelledError:  # the HTTP client went away
            with contextlib.suppress(PhloemError):
                await client.session_cancel(req.session_id)
            raise
        except (OSError, TimeoutError):  # it does not read, or its connection broke
            api.counters["clients_dropped"] += 1
            with contextlib.suppress(PhloemError):
                await client.session_cancel(req.session_id)
            if request.transport is not None:
                request.transport.abort()  # never wait for a client that does not read
    return response


# --- what phloem does not serve ----------------------------------------------------------

UNSUPPORTED_ROUTES: tuple[tuple[str, str, str], ...] = (
    ("*", "/apps/{app}/app-info", "app info"),
    ("PATCH", SESSION, "session state updates"),
    ("*", SESSION + "/artifacts", "artifacts"),
    ("*", SESSION + "/artifacts/{rest:.*}", "artifacts"),
    ("*", "/apps/{app}/users/{user}/memory", "memory"),
    ("*", "/apps/{app}/eval_sets{rest:.*}", "eval sets"),
    ("*", "/apps/{app}/eval_results{rest:.*}", "eval results"),
    ("*", "/apps/{app}/metrics-info", "eval metrics"),
    ("*", "/dev/apps/{app}/eval_results{rest:.*}", "eval results"),
    ("*", "/dev/apps/{app}/eval{rest:.*}", "eval sets"),
    ("*", "/dev/apps/{app}/metrics-info", "eval metrics"),
    ("*", "/dev/apps/{app}/tests{rest:.*}", "eval tests"),
    ("*", "/dev/apps/{app}/build_graph{rest:.*}", "build graphs"),
    ("*", "/dev/apps/{app}/builder{rest:.*}", "the agent builder"),
    ("*", "/dev/apps/{app}/debug/{rest:.*}", "traces"),
    ("*", "/dev/apps/{app}/users/{rest:.*}", "event graphs"),
    ("*", "/debug/{rest:.*}", "traces"),
    ("*", "/builder/{rest:.*}", "the agent builder"),
    ("*", "/agent-identity/{rest:.*}", "agent identity credentials"),
    ("*", "/config/telemetry", "telemetry settings"),
)


def _unsupported(feature: str) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return unsupported(feature, request)

    return handle


def build_app(api: Api, dev_ui: bool) -> web.Application:
    app = web.Application(middlewares=[check_access], client_max_size=api.cfg.max_body_bytes)
    app[API] = api
    router = app.router
    router.add_get("/health", health)
    router.add_get("/version", version)
    router.add_get("/list-apps", list_apps)
    router.add_get("/phloem/stats", stats)
    router.add_get(SESSIONS, list_sessions)
    router.add_post(SESSIONS, create_session)
    router.add_get(SESSION, get_session)
    router.add_post(SESSION, create_session_with_id)
    router.add_delete(SESSION, delete_session)
    router.add_post("/run", run)
    router.add_post("/run_sse", run_sse)
    router.add_get("/run_live", run_live)
    for method, path, feature in UNSUPPORTED_ROUTES:
        router.add_route(method, path, _unsupported(feature))
    if dev_ui:
        add_dev_ui(app)
    return app
