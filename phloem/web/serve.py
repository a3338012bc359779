"""`serve()`: run the web view until SIGTERM or SIGINT (what `phloem web` calls).

It prints one line, `phloem web: serving http://HOST:PORT/` (the real port when the
listen port is 0), once the socket is bound, then serves until stopped. An address it
cannot listen on (in use, not this machine's, not permitted) is `listen_failed`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TextIO

from aiohttp import web

from phloem.config import WebConfig
from phloem.web.access import Access, parse_listen
from phloem.web.app import build_app
from phloem.web.hub import Hub, cancel_and_wait
from phloem.web.listen import serve_until_stopped

SHUTDOWN_TIMEOUT_S = 5.0


async def serve(
    socket: Path, cfg: WebConfig, listen: str, reports_dir: Path | None, out: TextIO
) -> None:
    """Serve `listen` for the daemon at `socket` until SIGTERM/SIGINT."""
    host, port = parse_listen(listen)
    access = Access.for_listen(host, cfg.token_env)
    hub = Hub(socket, cfg, reports_dir)
    runner = web.AppRunner(
        build_app(hub, access), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S
    )
    await runner.setup()
    reader = asyncio.create_task(hub.run(), name="phloem-web-reader")
    try:
        await serve_until_stopped(runner, host, port, listen, "web", out)
    finally:
        hub.close()
        await cancel_and_wait(reader)
        await runner.cleanup()
