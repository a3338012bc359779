"""`LspClient`: one language server for one workspace root, as a supervised process child.

The server runs behind a `supervision.stdio` bridge (its own process group, killed when
the client closes). Messages are JSON-RPC in Content-Length frames (`protocols.framing`),
at most `MAX_MESSAGE_BYTES`; their params and results are `lsprotocol` types, converted
with its converter. Startup is `initialize` (within `initialize_timeout_s`) then
`initialized`. `check(path, text)` sends the full text — `didOpen` the first time,
then a `didChange` with the next version — and waits up to `settle_s` for the
`publishDiagnostics` of exactly that version; publications for older versions are
ignored. Requests the server makes of us (`workspace/configuration`, capability
registration, progress) get empty answers.

Failures (`LspFailure`): the program is not on PATH, it exits, it does not initialize in
time, a message breaks the framing. The hub counts them per server.

Each body is decoded by `decode_message`: nested deeper than
`protocols.depth.MAX_NESTING_DEPTH`, not JSON, or not a JSON object, it is the typed
`MessageInvalid` (kind `bad_message`), whatever the decoder raised (a `RecursionError`
too); such a message is logged (`lsp_bad_message`) and skipped, as is one whose content
does not fit its method (a malformed `publishDiagnostics`).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from lsprotocol.converters import get_converter

from phloem.actors.lsp.positions import OFFERED, UTF16, column, negotiated
from phloem.actors.lsp.settings import LspServerConfig
from phloem.base.logs import get_logger
from phloem.protocols.depth import check_json_depth
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.framing import ContentLengthDecoder, content_length_frame
from phloem.supervision.channel import ChannelClosed, ChannelError, ChannelTimeout
from phloem.supervision.reasons import ExitReason

log = get_logger("phloem.lsp")

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest LSP message, either way (a longer file is not checked)."""
RECV_POLL_S = 0.5
SEND_TIMEOUT_S = 5.0

_converter = get_converter()

StartChild = Callable[[str, list[str], str, int], Any]
"""(child id, argv, cwd, max_memory_bytes) -> a started process handle with a channel."""


class LspFailure(Exception):
    """The server failed (see the module docstring); `str()` says how."""


class MessageInvalid(PhloemError):
    """A message body from a language server that is not a JSON object (or nests too deep)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorKind.BAD_MESSAGE, message)


def decode_message(body: bytes) -> dict[str, Any]:
    """The JSON object of one message body, or `MessageInvalid` (nothing else)."""
    try:
        check_json_depth(body)
        value = json.loads(body)
    except Exception as exc:  # NestingTooDeep, ValueError, RecursionError, ...
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise MessageInvalid(f"not a JSON message: {text}") from None
    if not isinstance(value, dict):
        raise MessageInvalid(f"not a JSON object but {type(value).__name__}")
    return value


class LspClient:
    """One running (or startable) server for `root`; thread-safe."""

    def __init__(
        self,
        server_id: str,
        cfg: LspServerConfig,
        root: Path,
        start_child: StartChild,
        stop_child: Callable[[str], None],
    ) -> None:
        self.server_id = server_id
        self.cfg = cfg
        self.root = root
        digest = hashlib.sha1(str(root).encode()).hexdigest()[:10]
        self.child_id = f"{server_id}-{digest}"
        self._start_child = start_child
        self._stop_child = stop_child
        self._lock = threading.Lock()  # one start or check at a time
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._pending: dict[int, dict[str, Any]] = {}
        self._published: dict[str, tuple[int | None, list[lsp.Diagnostic], int]] = {}
        self._versions: dict[str, int] = {}
        self._sent_seq: dict[str, int] = {}
        self._seq = 0
        self._channel: Any = None
        self._handle: Any = None
        self._alive = False
        self._started = False  # started and not closed by us: an exit since is a crash
        self.pid: int | None = None
        self.position_encoding = UTF16  # what `initialize` negotiated (positions.py)

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def crashed(self) -> bool:
        """True when the server exited without our asking since it last started."""
        return self._started and not self._alive

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the server and initialize it; `LspFailure` if it cannot."""
        program = shutil.which(self.cfg.command[0])
        if program is None:
            raise LspFailure(f"{self.cfg.command[0]} is not on PATH")
        try:
            handle = self._start_child(
                self.child_id,
                [program, *self.cfg.command[1:]],
                str(self.root),
                self.cfg.max_memory_bytes,
            )
        except PhloemError as exc:
            raise LspFailure(f"cannot start: {exc.message}") from None
        self._channel = handle.channel
        self._handle = handle
        self.pid = getattr(handle, "pid", None)
        self._versions.clear()
        self._published.clear()
        decoder = ContentLengthDecoder(MAX_MESSAGE_BYTES)
        self._alive = True
        self._started = True
        handle.add_exit_callback(lambda _reason: self._gone())
        threading.Thread(
            target=self._read_loop, args=(self._channel, decoder), name="lsp-read", daemon=True
        ).start()
        params = lsp.InitializeParams(
            process_id=os.getpid(),
            root_uri=self.root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(self.root.as_uri(), self.root.name)],
            capabilities=lsp.ClientCapabilities(
                text_document=lsp.TextDocumentClientCapabilities(
                    synchronization=lsp.TextDocumentSyncClientCapabilities(),
                    publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                        version_support=True
                    ),
                ),
                workspace=lsp.WorkspaceClientCapabilities(configuration=True),
                general=lsp.GeneralClientCapabilities(position_encodings=list(OFFERED)),
            ),
        )
        result = self._request(lsp.INITIALIZE, params, self.cfg.initialize_timeout_s)
        self.position_encoding = negotiated(result)
        self._notify(lsp.INITIALIZED, lsp.InitializedParams())

    def close(self) -> None:
        """Ask a running server to shut down (`shutdown` within `request_timeout_s`, then
        `exit`), then stop its child: its process group is killed either way."""
        self._started = False
        if self._alive:
            with contextlib.suppress(LspFailure):
                self._request(lsp.SHUTDOWN, None, self.cfg.request_timeout_s)
                self._notify(lsp.EXIT, None)
        self._gone()
        self._stop_child(self.child_id)

    def exit_reason(self, timeout: float) -> ExitReason | None:
        """Why the server's child ended, waiting at most `timeout` (None: it runs still,
        or never started)."""
        handle = self._handle
        reason = handle.wait(timeout) if handle is not None else None
        return reason if isinstance(reason, ExitReason) else None

    def _gone(self) -> None:
        with self._cond:
            self._alive = False
            self._cond.notify_all()

    # -- diagnostics ----------------------------------------------------------------------

    def check(self, relative: str, text: str) -> list[lsp.Diagnostic] | None:
        """Send `text` as the new content of `relative` and return the diagnostics of
        that version, or None if none came within `settle_s`."""
        uri = (self.root / relative).as_uri()
        version = self._versions.get(uri)
        with self._cond:
            self._seq += 1
            self._sent_seq[uri] = self._seq
        if version is None:
            version = 1
            item = lsp.TextDocumentItem(uri, self.cfg.language_id, version, text)
            self._notify(lsp.TEXT_DOCUMENT_DID_OPEN, lsp.DidOpenTextDocumentParams(item))
        else:
            version += 1
            change = lsp.TextDocumentContentChangeWholeDocument(text=text)
            params = lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(version=version, uri=uri), [change]
            )
            self._notify(lsp.TEXT_DOCUMENT_DID_CHANGE, params)
        self._versions[uri] = version
        deadline = time.monotonic() + self.cfg.settle_s
        with self._cond:
            while True:
                found = self._published.get(uri)
                if found is not None and self._current(found, version, uri):
                    return self._in_code_points(found[1], text)
                if not self._alive:
                    raise LspFailure("the server exited")
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def _in_code_points(self, found: list[lsp.Diagnostic], text: str) -> list[lsp.Diagnostic]:
        """`found` with each start's `character` in code points of `text` (the server
        counts in its negotiated position encoding)."""
        out = []
        for item in found:
            start = item.range.start
            character = column(text, start.line, start.character, self.position_encoding)
            moved = copy.copy(item)
            moved.range = lsp.Range(lsp.Position(start.line, character), item.range.end)
            out.append(moved)
        return out

    def _current(self, found: tuple[int | None, list[Any], int], version: int, uri: str) -> bool:
        """A publication for `version` — or, from a server that sends no versions, one
        received after our change was sent."""
        published_version, _, seq = found
        if published_version is not None:
            return published_version == version
        return seq > self._sent_seq.get(uri, 0)

    def publish(self, params: lsp.PublishDiagnosticsParams) -> None:
        """Record a `publishDiagnostics` (the reader calls this for each one)."""
        with self._cond:
            self._seq += 1
            self._published[params.uri] = (params.version, list(params.diagnostics), self._seq)
            self._cond.notify_all()

    # -- JSON-RPC ---------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, ensure_ascii=False).encode()
        try:
            self._channel.send(content_length_frame(body, MAX_MESSAGE_BYTES), SEND_TIMEOUT_S)
        except (ChannelError, PhloemError) as exc:
            raise LspFailure(f"cannot send: {exc}") from None

    def _notify(self, method: str, params: Any) -> None:
        self._send(_message(method, params))

    def _request(self, method: str, params: Any, timeout: float) -> Any:
        request_id = next(self._ids)
        slot: dict[str, Any] = {}
        with self._cond:
            self._pending[request_id] = slot
        try:
            self._send({**_message(method, params), "id": request_id})
            deadline = time.monotonic() + timeout
            with self._cond:
                while not slot:
                    if not self._alive:
                        raise LspFailure(f"the server exited during {method}")
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise LspFailure(f"no answer to {method} within {timeout} s")
                    self._cond.wait(left)
        finally:
            with self._cond:
                self._pending.pop(request_id, None)
        if "error" in slot:
            raise LspFailure(f"{method} failed: {str(slot['error'])[:200]}")
        return slot.get("result")

    def _read_loop(self, channel: Any, decoder: ContentLengthDecoder) -> None:
        while True:
            try:
                chunk = channel.recv(RECV_POLL_S)
            except ChannelTimeout:
                if not self._alive:
                    return
                continue
            except (ChannelClosed, ChannelError):
                break
            if not isinstance(chunk, bytes):
                continue
            try:
                bodies = decoder.feed(chunk)
            except PhloemError as exc:
                log.warning("lsp_bad_frame", server=self.server_id, error=exc.message)
                break
            for body in bodies:
                try:
                    self._dispatch(decode_message(body))
                except MessageInvalid as exc:
                    log.warning("lsp_bad_message", server=self.server_id, error=exc.message)
                except Exception as exc:  # content that does not fit its method, a failed answer
                    error = f"{type(exc).__name__}: {str(exc)[:200]}"
                    log.warning("lsp_bad_message", server=self.server_id, error=error)
        self._gone()

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # a response
            with self._cond:
                slot = self._pending.get(message.get("id"))  # type: ignore[arg-type]
                if slot is not None:
                    slot.update(message)
                    self._cond.notify_all()
            return
        if "id" in message:  # the server asks us something
            result: Any = None
            if method == lsp.WORKSPACE_CONFIGURATION:
                items = (message.get("params") or {}).get("items") or []
                result = [None] * len(items)
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        if method == lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS:
            self.publish(_converter.structure(message["params"], lsp.PublishDiagnosticsParams))


def _message(method: str, params: Any) -> dict[str, Any]:
    """A JSON-RPC message for `method`; `params` (an `lsprotocol` value) left out if None."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = _converter.unstructure(params)
    return message
