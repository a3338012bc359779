"""A fake Gemini Live server on 127.0.0.1: for tests, benchmarks, `make run` and
`phloem live chat --demo`.

It speaks the `BidiGenerateContent` WebSocket protocol well enough to drive phloem's
Live sessions without the network: it answers `setup` with `setupComplete`, answers
each text input (`realtimeInput.text` or `clientContent`) with a model turn echoing it
(`"echo: <text>"`, then `turnComplete`) followed by a `sessionResumptionUpdate`, and
can echo audio chunks as text. Frames go out as binary WebSocket frames holding JSON,
as the real service sends them. A test can also:

- read what every connection sent (`connections[i].frames`, `.setup`, `.headers`, `.path`);
- inject any server frame (`inject`), send `goAway` or resumption updates;
- stall the handshake (`stall_accept`), the setup answer (`stall_setup`) or reading
  (`stall_reads`: the client's socket fills up and its writes wait);
- drop a connection without a close frame (`drop`), or every connection right after
  its setup and a resumable handle (`drop_after_setup`: resumed connections that never
  last);
- serve TLS (`FakeLiveServer(tls=context)`, a server `ssl.SSLContext`): its `url` is then
  `wss://`, for tests of the transport's certificate checks against a local CA.

Run it alone with `python -m phloem.actors.live.fake_server [--echo-audio]` (prints its URL).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

START_TIMEOUT_S = 10.0
MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_RECORDED_FRAMES = 100_000


@dataclass(eq=False)
class FakeConnection:
    """One client connection as the fake server saw it."""

    number: int
    path: str
    headers: Headers
    ws: ServerConnection
    frames: list[dict[str, Any]] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)
    close_code: int | None = None
    turns: int = 0

    @property
    def setup(self) -> dict[str, Any] | None:
        return next((f["setup"] for f in self.frames if "setup" in f), None)


class FakeLiveServer:
    """See the module docstring. `start()` it, use `url` as `[live] base_url`, `stop()`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.connections: list[FakeConnection] = []
        self.stall_accept = False
        self.stall_setup = False
        self.resumable = True  # send a resumable handle after every turn
        self.echo_audio = False  # answer every audio chunk with a text frame
        self.stall_reads = False  # stop reading client frames (their socket fills up)
        self.drop_after_setup = False  # answer setup, offer a handle, then cut the connection
        self.binary = True
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: Server | None = None
        self._thread = threading.Thread(target=self._run, name="fake-live", daemon=True)
        self._started = threading.Event()
        self.port = 0

    # -- running -------------------------------------------------------------------------

    def start(self) -> FakeLiveServer:
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise RuntimeError("the fake Live server did not start")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.run_forever()

    async def _serve(self) -> None:
        self._server = await serve(
            self._handle,
            "127.0.0.1",
            0,
            max_size=MAX_FRAME_BYTES,
            process_request=self._process_request,
            compression=None,
            ssl=self.tls,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._started.set()

    async def _process_request(self, connection: ServerConnection, request: Any) -> None:
        while self.stall_accept:
            await asyncio.sleep(0.01)

    @property
    def url(self) -> str:
        return f"{'wss' if self.tls is not None else 'ws'}://127.0.0.1:{self.port}"

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()

        if not self._loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(START_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)

    def __enter__(self) -> FakeLiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the protocol --------------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        request = ws.request
        assert request is not None
        with self._lock:
            conn = FakeConnection(len(self.connections), request.path, request.headers, ws)
            self.connections.append(conn)
        try:
            async for raw in ws:
                while self.stall_reads and not conn.closed.is_set():
                    await asyncio.sleep(0.01)
                frame = json.loads(raw)
                if len(conn.frames) < MAX_RECORDED_FRAMES:
                    conn.frames.append(frame)
                await self._answer(conn, frame)
        except ConnectionClosed:
            pass
        finally:
            conn.close_code = ws.close_code
            conn.closed.set()

    async def _answer(self, conn: FakeConnection, frame: dict[str, Any]) -> None:
        if "setup" in frame:
            while self.stall_setup:
                await asyncio.sleep(0.01)
            await self._send(conn, {"setupComplete": {}})
            if self.drop_after_setup:
                update = {"newHandle": f"handle-{conn.number}-0", "resumable": True}
                await self._send(conn, {"sessionResumptionUpdate": update})
                conn.ws.transport.abort()
            return
        text = None
        realtime = frame.get("realtimeInput", {})
        if "text" in realtime:
            text = realtime["text"]
        elif "clientContent" in frame:
            turns = frame["clientContent"].get("turns", [])
            text = " ".join(p.get("text", "") for t in turns for p in t.get("parts", []))
        elif "audio" in realtime and self.echo_audio:
            stamp = f"{time.time():.6f}"
            await self._send(conn, {"serverContent": {"modelTurn": {"parts": [{"text": stamp}]}}})
            return
        if text is None:
            return
        conn.turns += 1
        await self._send(
            conn, {"serverContent": {"modelTurn": {"parts": [{"text": f"echo: {text}"}]}}}
        )
        await self._send(conn, {"serverContent": {"turnComplete": True}})
        if self.resumable:
            handle = f"handle-{conn.number}-{conn.turns}"
            update = {"newHandle": handle, "resumable": True}
            await self._send(conn, {"sessionResumptionUpdate": update})

    async def _send(self, conn: FakeConnection, frame: dict[str, Any] | str | bytes) -> None:
        data = frame if isinstance(frame, str | bytes) else json.dumps(frame)
        if self.binary and isinstance(data, str):
            data = data.encode()
        await conn.ws.send(data)

    # -- test controls (any thread) ------------------------------------------------------

    def _on_loop(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(START_TIMEOUT_S)

    def connection(self, index: int = -1) -> FakeConnection:
        with self._lock:
            return self.connections[index]

    def inject(self, frame: dict[str, Any] | str | bytes, index: int = -1) -> None:
        """Send `frame` (a dict as JSON; str/bytes as they are) on a connection."""
        self._on_loop(self._send(self.connection(index), frame))

    def go_away(self, time_left: str = "10s", index: int = -1) -> None:
        self.inject({"goAway": {"timeLeft": time_left}}, index)

    def resumption(self, handle: str | None, resumable: bool, index: int = -1) -> None:
        update: dict[str, Any] = {"resumable": resumable}
        if handle is not None:
            update["newHandle"] = handle
        self.inject({"sessionResumptionUpdate": update}, index)

    def drop(self, index: int = -1) -> None:
        """Cut the connection without a close frame (a lost transport)."""
        conn = self.connection(index)

        async def abort() -> None:
            conn.ws.transport.abort()

        self._on_loop(abort())

    def wait_connections(self, count: int, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.connections) >= count:
                    return True
            time.sleep(0.005)
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    server = FakeLiveServer()
    server.echo_audio = "--echo-audio" in args
    server.start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
