"""`serve()`: run the ADK-compatible API until SIGTERM or SIGINT (what `phloem api` calls).

It prints one line, `phloem api: serving http://HOST:PORT/` (the real port when the
listen port is 0), once the socket is bound, then serves until stopped.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import TextIO

from aiohttp import web

from phloem.api.app import build_app
from phloem.api.daemon import Daemon
from phloem.api.shared import Api
from phloem.config import ApiConfig
from phloem.web.access import Access, parse_listen

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
    site = web.TCPSite(runner, host, port)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0]
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    print(f"phloem api: serving http://{shown}:{bound[1]}/", file=out, flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await daemon.aclose()
