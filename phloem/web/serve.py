"""`serve()`: run the web view until SIGTERM or SIGINT (what `phloem web` calls).

It prints one line, `phloem web: serving http://HOST:PORT/` (the real port when the
listen port is 0), once the socket is bound, then serves until stopped. An address it
cannot listen on (in use, not this machine's, not permitted) is `listen_failed`.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import TextIO

from aiohttp import web

from phloem.config import WebConfig
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.web.access import Access, parse_listen
from phloem.web.app import build_app
from phloem.web.hub import Hub, cancel_and_wait

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
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:  # in use, not an address of this machine, not permitted
        await runner.cleanup()
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise PhloemError(ErrorKind.LISTEN_FAILED, f"cannot listen on {listen}: {reason}") from None
    reader = asyncio.create_task(hub.run(), name="phloem-web-reader")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0]
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    print(f"phloem web: serving http://{shown}:{bound[1]}/", file=out, flush=True)
    try:
        await stop.wait()
    finally:
        hub.close()
        await cancel_and_wait(reader)
        await runner.cleanup()
