"""`phloem mcp serve --http HOST:PORT`: the same MCP server over streamable HTTP.

The server `serve.build_server` makes (the same tools, agents, confinement, output policy
and progress reports as on stdio) is served by the official SDK's streamable-HTTP
transport at `/mcp`, under uvicorn:

- sessions: `initialize` (a POST without `Mcp-Session-Id`) opens one and the answer
  carries its `Mcp-Session-Id`; every later request must carry it (an unknown id is
  404). The SDK answers any request but `initialize` and `ping` before `initialize`
  with an error, as the MCP lifecycle requires. At most `MAX_SESSIONS` sessions are
  open at once (one more is 503); one idle for `SESSION_IDLE_S` is closed. (A client
  of revision 2026-07-28, which has no handshake, is served request by request, as that
  revision specifies, behind the same checks.)
- SSE: a request's answer streams as server-sent events (progress notifications first,
  then the result); events are numbered in a `MemoryEventStore`, so a client whose stream
  broke resumes with `Last-Event-ID`, and the server tells clients to wait `RETRY_MS`
  before reconnecting (the SSE `retry` field).
- DNS-rebinding protection: a request whose `Host` is not the listening address (or
  `localhost` on a loopback address), or whose `Origin` is not an `http://` origin of
  those, is refused (421 / 403) before it reaches the session.
- bounds: a request body over `MAX_MESSAGE_BYTES` (4 MiB, the stdio line bound) is 413.

Only loopback addresses are accepted (`LoopbackOnly` otherwise): the endpoint has no
authentication of its own; expose it further only behind a proxy that authenticates.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings

from phloem.actors.mcp.events import MemoryEventStore
from phloem.actors.mcp.lines import MAX_MESSAGE_BYTES
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError

log = get_logger("phloem.mcp.serve")

PATH = "/mcp"
MAX_SESSIONS = 64
"""Most MCP sessions open at once on one `--http` server."""
SESSION_IDLE_S = 1800.0
"""A session without any request for this long is closed (its id then answers 404)."""
RETRY_MS = 1000
"""The SSE `retry` the server sends: how long a client waits before resuming a stream."""


class LoopbackOnly(PhloemError):
    """`--http` was given an address that is not loopback."""

    def __init__(self, host: str) -> None:
        super().__init__(
            ErrorKind.CONFIG_INVALID,
            f"--http serves loopback addresses only (127.0.0.1, ::1, localhost), not {host[:80]}",
        )


def parse_listen(text: str) -> tuple[str, int]:
    """(host, port) of `HOST:PORT` (`[::1]:PORT` for IPv6); `LoopbackOnly` for a host that
    is not loopback, `ValueError` for a malformed address."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--http wants HOST:PORT, got {text[:80]!r}")
    host = host.strip("[]")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise LoopbackOnly(host)
    return host, int(port_text)


def security_for(host: str, port: int) -> TransportSecuritySettings:
    """Host and Origin allowed for a server listening on `host:port`."""
    names = {host, "localhost", "127.0.0.1"} if host != "::1" else {"[::1]", "localhost"}
    hosts = sorted(f"{name}:{port}" for name in names)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )


def http_app(server: Server[Any], host: str, port: int) -> Any:
    """The Starlette app serving `server` at `PATH` for a listener on `host:port`."""
    return server.streamable_http_app(
        streamable_http_path=PATH,
        event_store=MemoryEventStore(),
        retry_interval=RETRY_MS,
        max_request_body_size=MAX_MESSAGE_BYTES,
        session_idle_timeout=SESSION_IDLE_S,
        max_sessions=MAX_SESSIONS,
        transport_security=security_for(host, port),
        host=host,
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


async def serve_http(server: Server[Any], host: str, port: int) -> None:
    """Serve `server` on `host:port` until cancelled (Ctrl-C, SIGTERM); says its URL on
    stderr (`listening on http://HOST:PORT/mcp`, the port resolved when 0)."""
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}{PATH}"
    config = uvicorn.Config(
        http_app(server, host, bound),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    log.info("mcp_serve_listening", url=url)
    print(f"listening on {url}", file=sys.stderr, flush=True)
    await _Server(config).serve(sockets=[sock])


class _Server(uvicorn.Server):
    """uvicorn's server, except that SIGINT or SIGTERM ends `serve` normally instead of
    being raised again after the shutdown (so the caller's cleanup, such as stopping the
    embedded tree of `--agents`, runs)."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
