"""Serving an aiohttp app until SIGTERM or SIGINT: the part `phloem web` and `phloem api`
share. `serve_until_stopped` binds the address (one `listen_failed` error when it cannot:
in use, not this machine's, not permitted), prints `phloem NAME: serving http://HOST:PORT/`
(the real port when the listen port was 0) once bound, and returns when a stop signal
arrives; the caller cleans up the runner after it, whichever way it ends."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import TextIO

from aiohttp import web

from phloem.protocols.errors import ErrorKind, PhloemError


async def serve_until_stopped(
    runner: web.AppRunner, host: str, port: int, listen: str, name: str, out: TextIO
) -> None:
    """Bind `runner` (set up, not yet listening) to `host:port` and wait for a stop signal."""
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise PhloemError(ErrorKind.LISTEN_FAILED, f"cannot listen on {listen}: {reason}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0]
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    print(f"phloem {name}: serving http://{shown}:{bound[1]}/", file=out, flush=True)
    await stop.wait()
