"""The aiohttp application of `phloem web`: pages, the event stream, the access check.

Routes (all GET but the login form's POST; nothing here changes the daemon):
`/` tree · `/runs` (`?kind=K&status=S`) and `/runs/ID` (one run's timeline) · `/sessions`
and `/sessions/ID` (one transcript, read from the daemon when asked) · `/live` · `/plots` ·
`/evals` and `/evals/NAME` · `/telemetry` ·
`/events?sections=a,b` (server-sent events, one event per changed section) ·
`/api/stats` (the web process's own counters, JSON) · `/static/...` (the CSS and JS
shipped in this package) · `/login` (the token form, for a non-loopback server).

Every request passes `Access.refusal` first (see access.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

import msgspec
from aiohttp import web

from phloem.client.aio import AsyncClient
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.evalreport import MAX_REPORT_BYTES, EvalReport, decode_json
from phloem.protocols.files import UnreadableFile, read_prefix
from phloem.web import runview, sessionview, views
from phloem.web.access import COOKIE_NAME, Access
from phloem.web.hub import ASK_TIMEOUT_S, RUN_SECTION, Hub, TooManyFollowers

KEEPALIVE_S = 15.0  # a comment line keeps idle proxies from closing the stream
SSE_SEND_BUFFER_BYTES = 16 * 1024  # the kernel's send buffer of one event stream
MAX_REPORT_FILES = 200  # newest first; older ones are not listed
MAX_FORM_BYTES = 8 * 1024
MAX_TRANSCRIPT_READS = 4  # transcripts read from the daemon at once; one more is 503
REPORT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.json$")
STATIC_TYPES = {"phloem.css": "text/css", "phloem.js": "text/javascript"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' "
    "'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

HUB = web.AppKey("hub", Hub)
ACCESS = web.AppKey("access", Access)
READS = web.AppKey("transcript_reads", asyncio.Semaphore)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def check_access(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every request: the access rule first, then the security headers."""
    access = request.app[ACCESS]
    if not (request.method == "POST" and request.path == "/login"):
        refusal = access.refusal(
            request.headers.get("Host", ""),
            request.headers.get("Authorization", ""),
            request.cookies.get(COOKIE_NAME),
        )
        if refusal == 401:
            text = "this view needs its token: send Authorization: Bearer TOKEN, or log in"
            return _html(views.message("token required", text, form=True), 401)
        if refusal:
            return _html(views.message("refused", "not a loopback host name"), refusal)
    response = await handler(request)
    if not response.prepared:
        response.headers.update(SECURITY_HEADERS)
    return response


def _html(text: str, status: int = 200) -> web.Response:
    response = web.Response(text=text, status=status, content_type="text/html")
    response.headers.update(SECURITY_HEADERS)
    return response


async def login(request: web.Request) -> web.Response:
    """The token form: a right token sets an HttpOnly cookie and goes to the tree."""
    if (request.content_length or 0) > MAX_FORM_BYTES:
        return _html(views.message("refused", "form too large"), 413)
    form = await request.post()
    token = form.get("token")
    if not isinstance(token, str) or not request.app[ACCESS].token_matches(token):
        return _html(views.message("token required", "wrong token", form=True), 401)
    response = web.HTTPSeeOther("/")
    response.set_cookie(COOKIE_NAME, token, httponly=True, samesite="Strict", path="/")
    return response


def _page(path: str, body: str = "") -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        hub = request.app[HUB]
        return _html(views.page(path, body or _body(hub, path), hub.rendered))

    return handle


async def runs_page(request: web.Request) -> web.StreamResponse:
    """The runs, filtered by `?kind=` and `?status=` (the script keeps the filter on
    every update)."""
    hub = request.app[HUB]
    kind, status = runview.wanted(request.query)
    shown = views.runs(runview.matching(hub.runs.views(), kind, status), hub.runs_error)
    html = views.page(
        "/runs",
        "",
        {**hub.rendered, "runs": runview.filter_form(kind, status) + shown},
        attrs=runview.filter_attrs(kind, status),
    )
    return _html(html)


async def run_page(request: web.Request) -> web.StreamResponse:
    """One run's timeline, updated live while it runs; 404 when the record has no such run."""
    hub = request.app[HUB]
    run_id = request.match_info["id"]
    section = f"run:{run_id}"
    if not RUN_SECTION.match(section):
        raise web.HTTPNotFound
    run = hub.runs.runs.get(run_id)
    detail = runview.run_detail(run, run_id, hub.cfg.trace_url, time.time())
    html = views.page(
        f"/runs/{run_id}",
        "",
        {**hub.rendered, section: detail},
        live=["summary", section],
        title=f"Run {run_id}",
    )
    return _html(html, 200 if run is not None else 404)


async def session_page(request: web.Request) -> web.StreamResponse:
    """One session's transcript, read from the daemon now (read-only; at most
    `MAX_TRANSCRIPT_READS` at once, each over its own connection)."""
    hub = request.app[HUB]
    session_id = request.match_info["id"]
    if not sessionview.SESSION_ID.match(session_id):
        raise web.HTTPNotFound
    reads = request.app[READS]
    if reads.locked():
        return _html(views.message("busy", "too many transcripts are being read"), 503)
    status = 200
    try:
        async with reads, await AsyncClient.connect(hub.socket) as client:
            detail = await asyncio.wait_for(
                client.session_show(session_id, max_events=sessionview.MAX_TRANSCRIPT_EVENTS),
                ASK_TIMEOUT_S,
            )
        body = sessionview.transcript(msgspec.to_builtins(detail))
    except (PhloemError, OSError, TimeoutError) as err:
        kind = getattr(err, "kind", type(err).__name__)
        status = 404 if kind == ErrorKind.UNKNOWN_SESSION else 502
        body = f"<p class=bad>session {views.e(session_id)} unavailable: {views.e(kind)}</p>"
    title = f"Session {session_id}"
    return _html(views.page(f"/sessions/{session_id}", body, hub.rendered, title=title), status)


def _body(hub: Hub, path: str) -> str:
    if path == "/evals":
        return views.eval_list(read_reports(hub.reports_dir))
    return ""


def read_reports(directory: Path | None) -> list[tuple[str, EvalReport | str]]:
    """The newest `MAX_REPORT_FILES` JSON reports in `directory`, each decoded or the
    reason it could not be (too large, not a report)."""
    if directory is None or not directory.is_dir():
        return []
    files = [p for p in directory.iterdir() if REPORT_NAME.match(p.name) and p.is_file()]
    files.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return [(p.name, read_report(p)) for p in files[:MAX_REPORT_FILES]]


def read_report(path: Path) -> EvalReport | str:
    try:
        data = read_prefix(path, MAX_REPORT_BYTES).data
    except UnreadableFile as err:
        return str(err)  # "cannot read: ...", "not a regular file"
    if len(data) > MAX_REPORT_BYTES:
        return f"larger than {MAX_REPORT_BYTES} bytes"
    try:
        return decode_json(data)
    except PhloemError as err:
        return err.message[: views.MAX_ERROR_CHARS]  # "not an eval report: ..."


async def eval_report(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    name = request.match_info["name"]
    if hub.reports_dir is None or not REPORT_NAME.match(name):
        raise web.HTTPNotFound
    path = hub.reports_dir / name
    if not path.is_file():
        raise web.HTTPNotFound
    report = read_report(path)
    if isinstance(report, str):
        body = f"<p class=bad>{views.e(report)}</p>"
    else:
        body = views.eval_report(name, report)
    return _html(views.page("/evals", body, hub.rendered))


async def static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in STATIC_TYPES:
        raise web.HTTPNotFound
    data = resources.files("phloem.web").joinpath("static", name).read_bytes()
    return web.Response(body=data, content_type=STATIC_TYPES[name])


async def stats(request: web.Request) -> web.StreamResponse:
    return web.json_response(request.app[HUB].stats())


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events for the sections asked; a browser that falls behind its queue
    or takes longer than `write_timeout_s` over one write is dropped (connection aborted)."""
    hub = request.app[HUB]
    wanted = frozenset(request.query.get("sections", "summary").split(","))
    try:
        follower = hub.follow(wanted)
    except TooManyFollowers:
        return _html(views.message("busy", "too many browsers follow this view"), 503)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **SECURITY_HEADERS})
    transport = request.transport
    try:
        await response.prepare(request)
        sock = None if transport is None else transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SSE_SEND_BUFFER_BYTES)
        timeout = hub.cfg.write_timeout_s
        while not follower.dropped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(follower.wake.wait(), KEEPALIVE_S)
            follower.wake.clear()
            if not follower.queue and not follower.dropped:
                await asyncio.wait_for(response.write(b": keepalive\n\n"), timeout)
            while follower.queue and not follower.dropped:
                await asyncio.wait_for(response.write(follower.queue.popleft()), timeout)
    except TimeoutError:
        if follower in hub.followers:
            hub.counters["followers_dropped"] += 1
        follower.dropped = True
    except ConnectionError:
        pass  # the browser went away
    finally:
        hub.unfollow(follower)
        follower.queue.clear()
    if follower.dropped and transport is not None:
        transport.abort()  # never wait for a browser that does not read
    return response


def build_app(hub: Hub, access: Access) -> web.Application:
    app = web.Application(middlewares=[check_access], client_max_size=MAX_FORM_BYTES)
    app[HUB] = hub
    app[ACCESS] = access
    app[READS] = asyncio.Semaphore(MAX_TRANSCRIPT_READS)
    for path, _, _ in views.PAGES:
        app.router.add_get(path, runs_page if path == "/runs" else _page(path))
    app.router.add_get("/runs/{id}", run_page)
    app.router.add_get("/sessions/{id}", session_page)
    app.router.add_get("/evals/{name}", eval_report)
    app.router.add_get("/events", events)
    app.router.add_get("/api/stats", stats)
    app.router.add_get("/static/{name}", static)
    app.router.add_post("/login", login)
    return app
