"""`serve()`: run the ADK-compatible API until SIGTERM or SIGINT (what `phloem api` calls).

It prints one line, `phloem api: serving http://HOST:PORT/` (the real port when the
listen port is 0), once the socket is bound, then serves until stopped. An address it
cannot listen on (in use, not this machine's, not permitted) is `listen_failed`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from aiohttp import web

from phloem.config import ApiConfig
from phloem.web.access import Access, parse_listen
from phloem.web.api.app import build_app
from phloem.web.api.daemon import Daemon
from phloem.web.api.shared import Api
from phloem.web.listen import serve_until_stopped

SHUTDOWN_TIMEOUT_S = 5.0


async def serve(
    socket: Path, cfg: ApiConfig, listen: str, user: str, dev_ui: bool, out: TextIO
) -> None:
    """Serve `listen` for the daemon at `socket` until SIGTERM/SIGINT."""
    host, port = parse_listen(listen, "api")
    access = Access.for_listen(host, cfg.token_env, "api")
    daemon = Daemon(socket)
    app = build_app(Api(daemon, cfg, access, user), dev_ui)
    # A client that goes away cancels its handler, and so its turn (see app.py).
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S, handler_cancellation=True
    )
    await runner.setup()
    try:
        await serve_until_stopped(runner, host, port, listen, "api", out)
    finally:
        await runner.cleanup()
        await daemon.aclose()
